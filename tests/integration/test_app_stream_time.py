"""A task's stream time carried to the App instance it moves to, on a real broker, at least
once and exactly once: the old owner commits it in the offsets' metadata, the new owner starts
from it, so a late record after the move fires the STREAM_TIME punctuation at the carried
stream time (Kafka Streams' behaviour), not at the late record's own timestamp.

``a`` owns both tasks of a 2-partition input and processes records up to 3.7 s of stream time
on each partition. ``b`` joins and one task moves to it; a record stamped 2.0 s (late) is
written to the moved task's partition. ``b`` emits its count stamped 3.7 s.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.errors import CommitFailedError
from tests.integration.punctuation_apps import (
    BASE_TS,
    actives,
    produce,
    read_committed,
    two_instances,
    wait_for,
)

pytestmark = [pytest.mark.integration]


async def scenario(bootstrap: str, tmp: str, guarantee: str) -> dict[str, Any]:
    counts, a, b = await two_instances("stime", bootstrap, tmp, guarantee)
    topic, out = a.config.application_id, counts.out
    result: dict[str, Any] = {}
    await a.start()
    runners = [asyncio.create_task(a.run())]
    try:
        await wait_for(lambda: actives(a) == {"0_0", "0_1"} and not a.tasks.restoring(), 60)
        await produce(bootstrap, topic, [(p, "k", BASE_TS + ts) for p in (0, 1) for ts in (0, 3_700)])
        await wait_for(lambda: a.tasks.records_processed >= 4, 30)
        await b.start()
        runners.append(asyncio.create_task(b.run()))
        await wait_for(lambda: len(actives(a)) == 1 and len(actives(b)) == 1 and not b.tasks.restoring(), 90)
        result["moved"] = moved = actives(b).pop()
        await produce(bootstrap, topic, [(int(moved.split("_")[1]), "late", BASE_TS + 2_000)])
        await wait_for(lambda: b.tasks.records_processed >= 1, 30)
        result["stream_time"] = b.tasks.stream_time(next(t for t in b.tasks.tasks if str(t) == moved))
        for app in (a, b):
            with contextlib.suppress(CommitFailedError):  # exactly-once while rebalancing: stop commits
                await app.commit()
    finally:
        for app in (b, a):
            await app.stop()
        for runner in runners:
            await runner
    result["out"] = await read_committed(bootstrap, out)
    return result


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_a_moved_task_punctuates_at_the_stream_time_its_old_owner_committed(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Any, guarantee: str
) -> None:
    got = asyncio.run(scenario(kafka.bootstrap_servers, str(tmp_path), guarantee))
    moved = got["moved"]
    assert got["stream_time"] == BASE_TS + 3_700
    emitted = sorted((r.timestamp - BASE_TS, r.key, r.value) for r in got["out"])
    # without the carried time ``b`` would emit the late record's count at 2000
    assert (3_700, b"late", f"{moved}:1".encode()) in emitted
    assert [e for e in emitted if e[1] == b"late"] == [(3_700, b"late", f"{moved}:1".encode())]
