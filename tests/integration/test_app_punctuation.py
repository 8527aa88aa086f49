"""Punctuation on a real broker, at least once and exactly once (the records read back
read_committed): what the schedules write is read back from the topics, and a task's schedules
end on the process that loses it and start on the one that gains it.

One App instance (``a``) owns both tasks of a 2-partition input. Each task counts records per
key; its STREAM_TIME schedule (every 1 s of record time) sends the counts to ``out`` with the
stream time as timestamp and clears them; its WALL_CLOCK_TIME schedule (every 200 ms) sends a
tick naming the instance to ``ticks``. Then ``b`` joins: one task moves to it. The moved task's
schedules on ``a`` are cancelled (its init handles say so) and no tick of it from ``a`` is
written after the hand-over, while ``b`` ticks it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.errors import CommitFailedError
from tests.integration.punctuation_apps import (
    BASE_TS,
    Counts,
    actives,
    produce,
    read_committed,
    two_instances,
    wait_for,
)

pytestmark = [pytest.mark.integration]


async def scenario(bootstrap: str, tmp: str, guarantee: str) -> dict[str, Any]:
    counts, a, b = await two_instances("punct", bootstrap, tmp, guarantee)
    topic, out, ticks = a.config.application_id, counts.out, counts.ticks
    result: dict[str, Any] = {"counts": counts}
    await a.start()
    runners = [asyncio.create_task(a.run())]
    try:
        await wait_for(lambda: actives(a) == {"0_0", "0_1"} and not a.tasks.restoring(), 60)
        # partition 0: stream time 0.0 s, 0.5 s, 1.2 s (fires: 1 s passed), 3.7 s (fires once)
        # partition 1: 0.1 s (fires: the first record), 0.9 s
        await produce(
            bootstrap,
            topic,
            [
                (0, "k", BASE_TS),
                (0, "k", BASE_TS + 500),
                (0, "j", BASE_TS + 1_200),
                (0, "k", BASE_TS + 3_700),
                (1, "m", BASE_TS + 100),
                (1, "m", BASE_TS + 900),
            ],
        )
        await wait_for(lambda: a.tasks.records_processed >= 6, 30)
        await asyncio.sleep(1.0)  # a few wall-clock ticks
        await b.start()
        runners.append(asyncio.create_task(b.run()))
        await wait_for(lambda: len(actives(a)) == 1 and len(actives(b)) == 1 and not b.tasks.restoring(), 90)
        result["moved"] = moved = actives(b).pop()
        result["kept"] = actives(a).pop()
        handed_over_ms = int(time.time() * 1000)
        await wait_for(lambda: ("b", moved) in counts.handles, 30)
        await asyncio.sleep(1.5)  # ticks after the hand-over
        for app in (a, b):
            with contextlib.suppress(CommitFailedError):  # exactly-once while rebalancing: stop commits
                await app.commit()
        result["handed_over_ms"] = handed_over_ms
    finally:
        for app in (b, a):
            await app.stop()
        for runner in runners:
            await runner
    result["out"] = await read_committed(bootstrap, out)
    result["ticks"] = await read_committed(bootstrap, ticks)
    return result


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_punctuation_writes_reach_the_topics_and_end_with_a_revoked_task(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Any, guarantee: str
) -> None:
    got = asyncio.run(scenario(kafka.bootstrap_servers, str(tmp_path), guarantee))
    # stream-time punctuations: the counts since the last one, stamped with the stream time
    emitted = sorted((r.timestamp - BASE_TS, r.key, r.value) for r in got["out"])
    assert emitted == [
        (0, b"k", b"0_0:1"),
        (100, b"m", b"0_1:1"),
        (1_200, b"j", b"0_0:1"),
        (1_200, b"k", b"0_0:1"),
        (3_700, b"k", b"0_0:1"),
    ]
    # partition 1's second record (0.9 s) is in the store, emitted by no punctuation yet
    ticks = [(r.key.decode(), r.value.decode(), r.timestamp) for r in got["ticks"]]
    moved, kept, handed_over = got["moved"], got["kept"], got["handed_over_ms"]
    counts: Counts = got["counts"]
    # on ``a`` the moved task's schedules were cancelled when it was revoked
    assert all(h.cancelled for h in counts.handles[("a", moved)])
    assert ("b", kept) not in counts.handles
    # every instance ticked its tasks; after the hand-over only ``b`` ticks the moved task
    assert {(task, name) for task, name, _ in ticks} >= {(moved, "a"), (kept, "a"), (moved, "b")}
    late_from_a = [ts for task, name, ts in ticks if task == moved and name == "a" and ts > handed_over]
    assert late_from_a == []
    assert any(task == moved and name == "b" and ts > handed_over for task, name, ts in ticks)
