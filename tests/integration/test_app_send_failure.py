"""A changelog record the broker never took: nothing commits past it, however many commits follow.

The crash audit once lost 34 input offsets on Tansu (seed 971665): the loop's commit waited on a
produce that Tansu kept answering NOT_LEADER_OR_FOLLOWER, ``App.stop`` timed out waiting for the
loop, and its own commit ran right after the loop's flush had raised the failure and cleared it:
the stop committed the input offsets of records whose changelog and output never reached the
broker. Here the producer fails every batch after a first, committed, round (the one test double:
``send_batch`` answers with a failed future, as aiokafka does when a batch times out), and the
committed offsets are read back from the broker.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import NotLeaderForPartitionError
from aiokafka.structs import TopicPartition as AioTP

from streamtasks.app import TasksRevived
from streamtasks.drills.stateful_app import make_app, record_for
from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.errors import ProcessingError
from streamtasks.runtime.admin import create_topics_async
from tests.ids import task

pytestmark = [pytest.mark.integration]

PARTITIONS = 2


async def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for seq in range(first, first + count):
            key, value = record_for(seq, 40)
            await producer.send(topic, key=key, value=value, partition=seq % PARTITIONS)
        await producer.flush()
    finally:
        await producer.stop()


def _settings(bootstrap: str, tmp: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "state_dir": tmp,
        "session_timeout_ms": 6_000,
        "heartbeat_interval_ms": 500,
        "commit_interval_ms": 600_000,  # commits only when the test asks
        "cache_max_bytes": 0,
        **extra,
    }


async def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await reader.start()
    try:
        return {p: await reader.committed(AioTP(topic, p)) for p in range(PARTITIONS)}
    finally:
        await reader.stop()


async def _scenario(
    bootstrap: str, tmp: str
) -> tuple[dict[int, int | None], dict[int, int | None], list[str]]:
    run = uuid.uuid4().hex[:8]
    app_id = topic = f"sendfail-{run}"
    await create_topics_async(bootstrap, {topic: PARTITIONS})
    await _produce(bootstrap, topic, 0, 100)
    settings = _settings(bootstrap, tmp, task_timeout_ms=0)  # the first retriable failure is fatal
    app = make_app(app_id, topic, settings)
    await app.start()
    errors: list[str] = []
    try:
        await asyncio.wait_for(app.run(until=lambda: app.tasks.records_processed >= 100), 60)
        await app.commit()
        good = await _committed(bootstrap, app_id, topic)

        assert app.producer is not None

        async def refused(*_: Any, **__: Any) -> asyncio.Future[Any]:
            failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            failed.set_exception(NotLeaderForPartitionError())
            return failed

        app.producer.send_batch = refused  # type: ignore[method-assign]
        await _produce(bootstrap, topic, 100, 60)
        await asyncio.wait_for(app.run(until=lambda: app.tasks.records_processed >= 160), 60)
        for _ in range(3):  # the failure is sticky: every later commit refuses
            with pytest.raises(ProcessingError, match="not delivered") as failure:
                await app.commit()
            errors.append(str(failure.value))
    finally:
        await app.stop()  # its commit, and the revocation's, must not pass the lost records either
    return good, await _committed(bootstrap, app_id, topic), errors


def test_no_commit_passes_a_record_that_was_not_delivered(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Any
) -> None:
    good, after, errors = asyncio.run(_scenario(kafka.bootstrap_servers, str(tmp_path)))
    assert sum(v or 0 for v in good.values()) == 100, good  # the first round was committed
    assert after == good, f"committed past records that were never delivered: {good} -> {after}"
    assert len(errors) == 3
    assert all("NotLeaderForPartitionError" in e for e in errors), errors


async def _revive_scenario(
    bootstrap: str, tmp: str
) -> tuple[dict[int, int | None], list[Any], dict[str, int]]:
    run = uuid.uuid4().hex[:8]
    app_id = topic = f"sendrevive-{run}"
    await create_topics_async(bootstrap, {topic: PARTITIONS})
    await _produce(bootstrap, topic, 0, 100)
    settings = _settings(bootstrap, tmp)
    events: list[Any] = []
    app = make_app(app_id, topic, settings, on_event=events.append)
    await app.start()
    try:
        await asyncio.wait_for(app.run(until=lambda: app.tasks.records_processed >= 100), 60)
        await app.commit()
        assert app.producer is not None
        producer: Any = app.producer

        async def refused(*_: Any, **__: Any) -> asyncio.Future[Any]:
            failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            failed.set_exception(NotLeaderForPartitionError())
            return failed

        producer.send_batch = refused
        await _produce(bootstrap, topic, 100, 60)
        await asyncio.wait_for(app.run(until=lambda: app.tasks.records_processed >= 160), 60)
        await app.commit()  # retriable: the tasks are revived, nothing raised, nothing committed
        del producer.send_batch  # the leader is back

        def caught_up() -> bool:
            done = app.tasks.committable(app.consumer.assignment())
            return not app.tasks.restoring() and sum(done.values()) >= 160

        await asyncio.wait_for(app.run(until=caught_up), 60)
        await app.commit()
        latest = {
            f"k{j}": app.tasks.tasks[task(f"0_{j % PARTITIONS}")].typed["latest"].get(f"k{j}")
            for j in range(40)
        }
    finally:
        await app.stop()
    return await _committed(bootstrap, app_id, topic), events, latest


def test_a_retriable_send_failure_revives_the_tasks_and_loses_nothing(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Any
) -> None:
    committed, events, latest = asyncio.run(_revive_scenario(kafka.bootstrap_servers, str(tmp_path)))
    assert committed == {0: 80, 1: 80}
    revived = [e for e in events if isinstance(e, TasksRevived)]
    assert len(revived) == 1
    assert "NotLeaderForPartitionError" in revived[0].error
    assert latest == {f"k{j}": 120 + j for j in range(40)}  # restored, then the failed round again
