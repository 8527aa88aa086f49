"""A driver that dies with an exception (a bug) must not leave the consumer fetching on with no
heartbeats and no commits, as a member that "never heartbeats again" would: the next
``getmany`` raises ``ConsumerFailedError`` naming the exception."""

from __future__ import annotations

import asyncio

import pytest

from streamtasks.runtime.consumer import Consumer, ConsumerFailedError


def test_getmany_raises_once_the_driver_has_crashed() -> None:
    async def go() -> None:
        consumer = Consumer(["t"], bootstrap_servers="127.0.0.1:1", group_id="g", group_protocol="consumer")

        async def crash() -> None:
            raise RuntimeError("boom")

        task = asyncio.get_running_loop().create_task(crash())
        consumer._driver_task = task
        await asyncio.wait({task})
        with pytest.raises(ConsumerFailedError, match="driver failed with RuntimeError"):
            await consumer.getmany(timeout_ms=10)

    asyncio.run(go())


def test_a_driver_that_ended_cleanly_or_was_cancelled_is_no_failure() -> None:
    from streamtasks.runtime.driver_task import task_failure as _failure

    async def go() -> tuple[object, object, object]:
        async def ends() -> None:
            return None

        clean = asyncio.get_running_loop().create_task(ends())
        cancelled = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        await asyncio.wait({clean})
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        return _failure(clean), _failure(cancelled), _failure(None)

    assert asyncio.run(go()) == (None, None, None)
