"""Stateful apps on a real broker: the wordcount example, and a crash with standbys followed by
a scale-out with warm-ups (the demo's stateful phase, smaller)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from streamtasks.drills.stateful_demo import run_stateful_phase
from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from tests.example_loader import load_example

pytestmark = pytest.mark.integration


@pytest.mark.smoke
def test_wordcount_example_counts_every_word_exactly(kafka: EmbeddedBroker | ExternalCluster) -> None:
    example = load_example("examples/wordcount/wordcount.py", "wordcount_example")
    status = asyncio.run(example.main(kafka.bootstrap_servers, repeat=20, timeout_s=90.0))
    assert status == 0


def test_crash_promotes_standbys_and_warmups_take_over(kafka: EmbeddedBroker | ExternalCluster) -> None:
    out = io.StringIO()
    report = asyncio.run(run_stateful_phase(kafka.bootstrap_servers, out, partitions=4, keys=200, rate=300))
    print(out.getvalue())
    assert report.problems == [], out.getvalue()
    # Idempotent store: exactly the last value produced for every key, even after kill -9.
    assert report.keys == 200
    assert report.latest_mismatches == 0
    # Counting store: nothing lost; duplicates bounded by what one commit interval (0.5 s) plus
    # failure detection can replay at 300 records/s.
    assert report.missing_counts == 0
    assert report.duplicate_counts <= 300 * 8
    # The standby made the restore after the crash far smaller than a restore from scratch.
    assert report.promoted_tasks >= 1
    assert report.crash_restored_records < report.crash_full_restore_records / 2
    # The fresh worker got warm-ups, asked for a rebalance once caught up, and became active.
    assert report.warmups >= 1
    assert report.lag_triggers >= 1
    assert report.moved_to_new >= 1
    # Cooperative: tasks that stayed on the old worker were never closed or rebuilt.
    assert report.kept_tasks >= 1
    assert report.kept_task_restarts == 0


async def _restart_on_same_state_dir(bootstrap: str, tmp: Path) -> tuple[list[object], int]:
    import uuid

    from aiokafka import AIOKafkaProducer

    from streamtasks.app import RestoreCompleted, TaskCreated
    from streamtasks.drills.stateful_app import make_app, record_for
    from streamtasks.runtime.admin import create_topics_async

    run = uuid.uuid4().hex[:8]
    app_id, topic = f"restart-{run}", f"restart-{run}"
    await create_topics_async(bootstrap, {topic: 4})
    settings = {
        "bootstrap_servers": bootstrap,
        "session_timeout_ms": 6_000,
        "heartbeat_interval_ms": 500,
        "rebalance_timeout_ms": 10_000,
        "commit_interval_ms": 300,
        "acceptable_recovery_lag": 100_000,
        # Every update written, so the changelogs hold all 4,000 x 2 (the record cache, on by
        # default, merges a key's updates between commits and would write fewer).
        "cache_max_bytes": 0,
    }
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    for seq in range(4_000):
        key, value = record_for(seq, 400)
        await producer.send(topic, key=key, value=value)
    await producer.flush()
    await producer.stop()

    async def run_until(app: object, done: object) -> None:
        await app.run(until=done)  # type: ignore[attr-defined]

    first = make_app(app_id, topic, {**settings, "state_dir": str(tmp / "a"), "client_id": "a"})
    await first.start()
    runner = asyncio.create_task(run_until(first, lambda: first.tasks.records_processed >= 4_000))
    await asyncio.wait_for(runner, 90)
    await first.stop()
    changelog_records = sum(
        task_sum
        for task_sum in first.directory.offset_sums(
            {t: i.changelog_partitions for t, i in first.tasks._infos.items()}
        ).values()
    )
    again = make_app(app_id, topic, {**settings, "state_dir": str(tmp / "a"), "client_id": "a2"})
    await again.start()
    runner = asyncio.create_task(
        run_until(again, lambda: len(again.tasks.roles()) == 4 and not again.tasks.restoring())
    )
    await asyncio.wait_for(runner, 90)
    await again.stop()
    events = [e for e in again.events if isinstance(e, TaskCreated | RestoreCompleted)]
    return events, changelog_records


def test_restart_on_the_same_state_dir_keeps_its_state(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Path
) -> None:
    from streamtasks.app import RestoreCompleted, TaskCreated

    events, changelog_records = asyncio.run(_restart_on_same_state_dir(kafka.bootstrap_servers, tmp_path))
    created = [e for e in events if isinstance(e, TaskCreated)]
    restored = [e for e in events if isinstance(e, RestoreCompleted)]
    assert changelog_records >= 8_000  # 4,000 records x 2 stores were written and checkpointed
    # The restarted process opened its tasks from the checkpoints it left...
    assert len(created) == 4
    assert all(e.offset_sum > 0 for e in created)
    # ...so it restored nothing, instead of every changelog record.
    assert sum(e.records for e in restored) == 0
