"""``streamtasks.App(group_protocol="streams")`` in a KIP-1071 streams group on the embedded
Apache Kafka 4.4.0: the broker's task assignor places the active and standby tasks (the App's
``num_standby_replicas`` becomes the group's ``streams.num.standby.replicas``), the App runs
them, commits with the member epoch, and the per-offset audits of the classic and KIP-848
paths hold: every input offset the broker acknowledged is processed, no task is ever active on
two live workers, and the state read back from the changelogs is right.

* the crash audit (at-least-once): 3 workers, kill -9 of one, a fresh worker joins, a rolling
  bounce of every survivor; 0 lost, 0 dual-active;
* the same under exactly_once_v2 (TxnOffsetCommit with the streams member's id and epoch):
  every acknowledged offset exactly once in the committed output;
* the demo's stateful phase: standbys promoted after kill -9, a fresh worker takes actives,
  latest values and counts in the changelogs match what was produced;
* a scale-out from one worker to three under load: 0 lost, 0 dual-active;
* a member frozen past the session timeout is fenced when it thaws: its tasks close dirty, it
  rejoins and runs tasks again; 0 lost.
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from streamtasks.drills._proc import LOGS_ENV
from streamtasks.drills.crash_audit import run_crash_audit
from streamtasks.drills.dual_active import dual_active
from streamtasks.drills.offset_audit import AuditTopicReader
from streamtasks.drills.stateful_demo import DrillRun, run_stateful_phase
from streamtasks.embedded import Cluster, EmbeddedBroker
from streamtasks.protocol.streams_group import STREAMS_GROUP_HEARTBEAT_API_KEY
from streamtasks.runtime.admin import create_topics_async

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def streams_kafka(kafka: Cluster) -> Cluster:
    """The test cluster, or a skip where it has no streams-group coordinator."""
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip("Tansu does not serve StreamsGroupHeartbeat (API 88); run with STREAMTASKS_BROKER=kafka")
    if kafka.api_versions().get(STREAMS_GROUP_HEARTBEAT_API_KEY, (0, -1))[1] < 1:
        pytest.skip("the cluster does not serve StreamsGroupHeartbeat v1 (API 88)")
    return kafka


@pytest.mark.parametrize(("guarantee", "seed"), [("at_least_once", 7), ("exactly_once_v2", 3)])
def test_no_acknowledged_offset_is_lost_and_no_task_is_dual_active_across_crash_scale_out_and_bounce(
    streams_kafka: Cluster, guarantee: str, seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = Path(os.environ.get(LOGS_ENV) or tmp_path) / f"streams-{guarantee}-{seed}"
    monkeypatch.setenv(LOGS_ENV, str(log_dir))
    out = io.StringIO()
    report = asyncio.run(
        run_crash_audit(
            streams_kafka.bootstrap_servers,
            out,
            seed=seed,
            workers=3,
            partitions=6,
            keys=500,
            rate=300,
            guarantee=guarantee,
            bounce=True,
            kill_busy=True,
            group_protocol="streams",
        )
    )
    print(out.getvalue())
    assert report.offsets.acknowledged > 1_000, report.line()
    assert report.complete, report.line()
    assert report.offsets.lost == 0, (report.line(), report.offsets.lost_runs, log_dir)
    assert report.dual_active == (), report.dual_active
    assert report.bounced == 3
    if guarantee == "exactly_once_v2":
        assert report.offsets.duplicates == 0, report.line()


def test_standbys_are_promoted_and_the_state_read_back_is_right(streams_kafka: Cluster) -> None:
    out = io.StringIO()
    report = asyncio.run(
        run_stateful_phase(
            streams_kafka.bootstrap_servers, out, partitions=4, keys=200, rate=300, group_protocol="streams"
        )
    )
    print(out.getvalue())
    assert report.problems == [], out.getvalue()  # dual-active spells would be problems
    assert report.keys == 200
    assert report.latest_mismatches == 0
    assert report.missing_counts == 0
    assert report.offsets is not None
    assert report.offsets.lost == 0, report.offsets.lost_runs
    assert report.offsets.acknowledged > 0
    # The broker placed a standby of each task on the other worker: the survivor promotes them.
    assert report.promoted_tasks >= 1
    assert report.crash_restored_records < report.crash_full_restore_records / 2
    # Kafka 4.4 has no warm-ups: the fresh worker gets actives moved cold.
    assert report.warmups == 0
    assert report.moved_to_new >= 1


async def _scale_out(bootstrap: str, out: io.StringIO) -> tuple[DrillRun, bool]:
    """One worker, then two more at once while the producer writes; drained, stopped."""
    run = DrillRun(bootstrap, out, partitions=6, keys=300, rate=300, group_protocol="streams")
    await create_topics_async(bootstrap, {run.topic: 6, run.audit_topic: 1})
    reader = AuditTopicReader(bootstrap, run.audit_topic, run.offsets)
    await reader.start()
    stop = asyncio.Event()
    try:
        with tempfile.TemporaryDirectory(prefix="streamtasks-streams-scale-") as state_root:
            first = run.worker("w1", state_root)
            await first.start()
            producer = asyncio.get_running_loop().create_task(run.produce(stop))
            await run.wait_for("w1 active for every task", lambda: len(run.active_owner()) == 6, 60)
            others = [run.worker("w2", state_root), run.worker("w3", state_root)]
            for w in others:
                await w.start()
            spread = await run.wait_for(
                "every worker active for some task",
                lambda: (
                    set(run.active_owner().values()) == {"w1", "w2", "w3"} and len(run.active_owner()) == 6
                ),
                90,
            )
            await asyncio.sleep(2.0)
            stop.set()
            await producer
            complete = await reader.wait_complete(60)
            for w in (first, *others):
                await w.stop()
    finally:
        await reader.stop()
    return run, spread and complete


def test_a_scale_out_from_one_worker_to_three_loses_nothing_and_never_runs_a_task_twice(
    streams_kafka: Cluster,
) -> None:
    out = io.StringIO()
    run, ok = asyncio.run(_scale_out(streams_kafka.bootstrap_servers, out))
    print(out.getvalue())
    report = run.offsets.report()
    print(f"scale-out 1 -> 3: {report.line()}; {len(dual_active(run.lines))} dual-active tasks")
    assert ok, out.getvalue()
    assert report.acknowledged > 500, report.line()
    assert report.lost == 0, report.lost_runs
    assert dual_active(run.lines) == []


async def _fence(bootstrap: str, out: io.StringIO) -> tuple[DrillRun, int, bool]:
    """Two workers; w1 is frozen (SIGSTOP) past the broker's 10 s session timeout, so the group
    drops it and w2 takes its tasks, then thawed (SIGCONT): its next heartbeat is refused, it
    loses its tasks (closed dirty) and rejoins with the same member id."""
    run = DrillRun(bootstrap, out, partitions=4, keys=200, rate=200, group_protocol="streams")
    await create_topics_async(bootstrap, {run.topic: 4, run.audit_topic: 1})
    reader = AuditTopicReader(bootstrap, run.audit_topic, run.offsets)
    await reader.start()
    stop = asyncio.Event()
    try:
        with tempfile.TemporaryDirectory(prefix="streamtasks-streams-fence-") as state_root:
            w1, w2 = run.worker("w1", state_root), run.worker("w2", state_root)
            await w1.start()
            await w2.start()
            producer = asyncio.get_running_loop().create_task(run.produce(stop))
            await run.wait_for(
                "both workers active", lambda: set(run.active_owner().values()) == {"w1", "w2"}, 60
            )
            assert w1.proc is not None
            w1.proc.send_signal(signal.SIGSTOP)
            thawed_ms = 0
            try:
                await run.wait_for(
                    "w2 active for every task", lambda: list(w2.tasks.values()).count("active") == 4, 40
                )
            finally:
                w1.proc.send_signal(signal.SIGCONT)
                thawed_ms = time.time_ns() // 1_000_000
            back = await run.wait_for(
                "w1 active again",
                lambda: any(e["role"] == "active" for e in run.events("w1", "TaskCreated", thawed_ms)),
                60,
            )
            stop.set()
            await producer
            complete = await reader.wait_complete(60)
            for w in (w1, w2):
                await w.stop()
    finally:
        await reader.stop()
    return run, thawed_ms, back and complete


def test_a_fenced_member_closes_its_tasks_dirty_and_rejoins(streams_kafka: Cluster) -> None:
    out = io.StringIO()
    run, thawed_ms, ok = asyncio.run(_fence(streams_kafka.bootstrap_servers, out))
    print(out.getvalue())
    report = run.offsets.report()
    dirty = [e for e in run.events("w1", "TaskClosed", thawed_ms) if not e["clean"]]
    print(f"fenced: {len(dirty)} tasks closed dirty on w1 after the thaw; {report.line()}")
    assert ok, out.getvalue()
    assert dirty, run.events("w1", None, thawed_ms)
    assert report.lost == 0, report.lost_runs
