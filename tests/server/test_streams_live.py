"""Streams groups on ``streamtasks coordinator`` in front of the embedded Apache Kafka:
``App(group_protocol="streams")`` workers bootstrapped to the coordinator (its task assignor
``high_availability`` places the tasks, not the broker's) process the stateful drill's counts
with the per-offset audit; one worker is bounced; then the coordinator is killed with -9 and a
second process on the same port replays the log and the group continues: every acknowledged
input offset is processed, no task is ever active on two workers, the described group is
the one the first process left."""

from __future__ import annotations

import asyncio
import contextlib
import io
import tempfile
import time
from dataclasses import dataclass

import pytest

from streamtasks.drills.dual_active import dual_active
from streamtasks.drills.mixed_streams import describe_group as describe
from streamtasks.drills.offset_audit import AuditTopicReader
from streamtasks.drills.stateful_demo import DrillRun
from streamtasks.embedded import Cluster
from streamtasks.protocol.streams_group import DescribedStreamsGroup
from streamtasks.runtime.admin import create_topics_async
from tests.server.support import FAST, ServerProcess

pytestmark = pytest.mark.integration

#: The coordinator's streams settings for a short test: lags reported every second, one standby.
STREAMS = (
    "--streams-task-offset-interval-ms",
    "1000",
    "--streams-num-standby-replicas",
    "1",
)
PARTITIONS = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Seen:
    before: DescribedStreamsGroup
    after: DescribedStreamsGroup
    replayed_line: str
    bounced_back: bool
    continued: bool
    complete: bool


def _active_everywhere(run: DrillRun, names: set[str]) -> bool:
    """Every task active on one of ``names``, and each of them holding a task (an active, a
    standby or a warm-up: high_availability keeps the actives where the state is caught up
    and warms the newcomer up first; it takes its tasks when its lag report shows it caught up)."""
    owners = run.active_owner()
    return (
        len(owners) == PARTITIONS
        and set(owners.values()) <= names
        and all(run.workers[n].tasks for n in names)
    )


async def _scenario(kafka: Cluster, server: ServerProcess, out: io.StringIO) -> tuple[DrillRun, Seen]:
    run = DrillRun(
        kafka.bootstrap_servers,
        out,
        PARTITIONS,
        200,
        300,
        group_bootstrap=server.address,
        group_protocol="streams",
    )
    await create_topics_async(kafka.bootstrap_servers, {run.topic: PARTITIONS, run.audit_topic: 1})
    reader = AuditTopicReader(kafka.bootstrap_servers, run.audit_topic, run.offsets)
    await reader.start()
    stop = asyncio.Event()
    producer: asyncio.Task[None] | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="streamtasks-coord-streams-") as state_root:
            w1, w2 = run.worker("w1", state_root), run.worker("w2", state_root)
            await w1.start()
            await w2.start()
            producer = asyncio.get_running_loop().create_task(run.produce(stop))
            spread = await run.wait_for(
                "both workers with tasks", lambda: _active_everywhere(run, {"w1", "w2"}), 40
            )
            # one member bounced (SIGTERM: it leaves; back with its state directory)
            await w2.stop()
            alone = await run.wait_for(
                "w1 active for every task", lambda: _active_everywhere(run, {"w1"}), 30
            )
            bounced = run.worker("w2", state_root)
            await bounced.start()
            bounced_back = (
                await run.wait_for("w2 with tasks again", lambda: _active_everywhere(run, {"w1", "w2"}), 40)
                and spread
                and alone
            )
            before = await describe(server.address, run.app_id)
            # fail-over: kill -9, a second process replays the log on the same port
            await asyncio.to_thread(server.kill)
            restarted = time.monotonic()
            await asyncio.to_thread(server.start)
            replayed_line = next(line for line in reversed(server.lines) if "listening on" in line)
            after = await describe(server.address, run.app_id)
            seq = run.seq
            continued = await run.wait_for(
                "processing after the fail-over",
                lambda: run.offsets.report().processed > seq and time.monotonic() - restarted > 8,
                40,
            )
            stop.set()
            await producer
            complete = await reader.wait_complete(40)
            for w in (w1, bounced):
                await w.stop()
    finally:
        stop.set()
        if producer is not None:
            with contextlib.suppress(Exception):
                await producer
        await reader.stop()
    return run, Seen(
        before=before,
        after=after,
        replayed_line=replayed_line,
        bounced_back=bounced_back,
        continued=continued,
        complete=complete,
    )


def test_apps_in_a_streams_group_served_by_the_coordinator_survive_a_bounce_and_a_fail_over(
    kafka: Cluster,
) -> None:
    server = ServerProcess(kafka.bootstrap_servers, extra=(*FAST, *STREAMS)).start()
    out = io.StringIO()
    try:
        run, seen = asyncio.run(_scenario(kafka, server, out))
    finally:
        server.stop()
        print(out.getvalue())
        print("\n".join(line for line in server.lines if not line.startswith("status:")))
    print(out.getvalue())
    report = run.offsets.report()
    print(f"coordinator streams group: {report.line()}; {len(dual_active(run.lines))} dual-active tasks")
    print(seen.replayed_line)
    print(server.status())
    assert seen.bounced_back, out.getvalue()
    assert seen.continued, out.getvalue()
    assert seen.complete, report.line()
    assert report.acknowledged > 1_000, report.line()
    assert report.lost == 0, report.lost_runs
    assert dual_active(run.lines) == []
    # the group came out of the log: same epoch, same members and tasks
    assert "1 streams groups" in seen.replayed_line
    assert seen.before.assignor_name == "high_availability"
    assert seen.after.group_epoch == seen.before.group_epoch
    assert {m.member_id for m in seen.after.members} == {m.member_id for m in seen.before.members}
    assert len(seen.before.members) == 2
