"""A task that starts restoring while the processing loop's fetch is in flight loses no input.

Deterministic on a real broker: two apps share the work; the second leaves, and the first's
next fetch is held until the moved task has been created (restoring, its partition paused) and
records have been written to the moved partition; the first app's changelog reads are held
until that fetch has returned, so the restore cannot finish first. Issue 10's loss happened
exactly there: the fetch returned the paused partition's records, they were dropped, and the
partition went on after the gap once restored. Every input offset the broker acknowledged must
be processed (read back from the app's audit topic).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from streamtasks.app import AppEvent, RestoreCompleted, TaskCreated
from streamtasks.drills.offset_audit import AuditTopicReader, OffsetAudit
from streamtasks.drills.stateful_app import make_app, record_for
from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.runtime.admin import create_topics_async
from tests.integration.harness import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.smoke]


async def _race(bootstrap: str, tmp: Path) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    app_id = topic = f"race-{run}"
    audit_topic = f"race-{run}-audit"
    await create_topics_async(bootstrap, {topic: 2, audit_topic: 1})
    audit = OffsetAudit()
    reader = AuditTopicReader(bootstrap, audit_topic, audit)
    await reader.start()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    seq = 0

    async def produce(partition: int, n: int) -> None:
        nonlocal seq
        for _ in range(n):
            key, value = record_for(seq, 50)
            await audit.send(producer, topic, key=key, value=value, partition=partition)
            seq += 1
        await producer.flush()

    events: list[AppEvent] = []
    settings = {
        "bootstrap_servers": bootstrap,
        "session_timeout_ms": 6_000,
        "heartbeat_interval_ms": 500,
        "rebalance_timeout_ms": 10_000,
        "commit_interval_ms": 300,
        "num_standby_replicas": 0,  # the moved task restores from its changelog
    }
    first = make_app(
        app_id, topic, {**settings, "state_dir": str(tmp / "a"), "client_id": "a"},
        audit_topic=audit_topic, on_event=events.append,
    )  # fmt: skip
    second = make_app(
        app_id, topic, {**settings, "state_dir": str(tmp / "b"), "client_id": "b"}, audit_topic=audit_topic
    )
    stop_first = asyncio.Event()
    await first.start()
    runner = asyncio.create_task(first.run(until=stop_first.is_set))
    await second.start()
    second_runner = asyncio.create_task(second.run())
    try:
        await wait_until(
            lambda: len(first.tasks.roles()) == 1 and len(second.tasks.roles()) == 1, 60, "one task each"
        )
        await produce(0, 100)
        await produce(1, 100)
        assert await reader.wait_complete(30), audit.report().line()
        moved = next(iter(second.tasks.roles()))  # the task whose partition moves to `first`
        moved_partition = moved.partition

        created = asyncio.Event()
        returned = asyncio.Event()
        armed = True
        fetcher = first.consumer._fetcher
        assert fetcher is not None
        fetch_records, read_changelog = fetcher.getmany, first.reader.fetch

        async def held_fetch(*args: Any, **kwargs: Any) -> Any:
            nonlocal armed
            if not armed:
                return await fetch_records(*args, **kwargs)
            armed = False
            await created.wait()  # the moved task exists, restoring; its partition is paused
            await produce(moved_partition, 50)  # records the in-flight fetch can bring back
            # One long fetch, as the in-flight one would have been: everything the fetcher
            # returns over two seconds, merged.
            merged: dict[Any, list[Any]] = {}
            try:
                for _ in range(20):
                    for tp, records in (await fetch_records(*args, **kwargs)).items():
                        merged.setdefault(tp, []).extend(records)
                return merged
            finally:
                returned.set()

        async def held_changelog_read(*args: Any, **kwargs: Any) -> Any:
            if created.is_set() and not returned.is_set():
                await returned.wait()
            return await read_changelog(*args, **kwargs)

        def on_event(event: AppEvent) -> None:
            events.append(event)
            if isinstance(event, TaskCreated) and event.task == moved and event.role == "active":
                created.set()

        fetcher.getmany = held_fetch  # type: ignore[method-assign]
        first.reader.fetch = held_changelog_read  # type: ignore[method-assign]
        first._on_event = on_event
        armed_at = len(events)  # the moved task may have restored on `first` before (an earlier round)
        await asyncio.sleep(0.3)  # the processing loop is now inside held_fetch, waiting
        await second.stop()  # leaves the group: the moved task becomes active on `first`
        second_runner.cancel()
        await wait_until(created.is_set, 60, "the moved task to be created on the first app")
        await wait_until(returned.is_set, 30, "the held fetch to return")
        await produce(moved_partition, 50)
        complete = await reader.wait_complete(60)
        restored = [e for e in events[armed_at:] if isinstance(e, RestoreCompleted) and e.task == moved]
        return {"complete": complete, "report": audit.report(), "restored": restored, "moved": moved}
    finally:
        stop_first.set()
        await asyncio.wait_for(runner, 30)
        await first.stop()
        await second.stop()
        second_runner.cancel()
        await producer.stop()
        await reader.stop()


def test_a_task_restoring_during_an_in_flight_fetch_loses_no_input(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Path
) -> None:
    result = asyncio.run(_race(kafka.bootstrap_servers, tmp_path))
    report = result["report"]
    assert report.acknowledged == 300, report.line()
    assert result["complete"], report.line()
    assert report.lost == 0, report.line()
    # The moved task really restored (from the second app's changelog writes) before processing.
    assert result["restored"], "the moved task never completed a restore"
    assert result["restored"][0].records > 0
