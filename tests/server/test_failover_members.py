"""streamtasks' own KIP-848 members (``Consumer(group_protocol="consumer")``) through a kill -9
and restart of ``streamtasks coordinator`` in the middle of a stream, with client-side
assignment (``range`` through Prepare/Install) and with the server's assignor: every member
finds the restarted server, heartbeats to it at the epoch it had and keeps its member id and
partitions (no callback at all), commits resume against the new process, no partition is
owned twice and every acknowledged (partition, offset) is consumed.

``test_live.py`` has the same drill with librdkafka members. A member gives its partitions up
when no heartbeat it sent within the coordinator's session timeout was answered (it reads the
server's ``--session-timeout-ms`` at start), so the server runs with 20 s here: a slow restart
on a busy machine is not mistaken for a lost member (with 6 s, restarts under load outlasted
it and the members fenced themselves), and a member that never heartbeats to the restarted
server is still removed after 20 s and its partitions move, which fails the test."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import pytest

from assignors.partition.range import RangeAssignor
from streamtasks.embedded import Cluster
from streamtasks.protocol.consumer_group import DescribedGroup
from tests.integration.harness import Audit, SteadyProducer, StreamtasksWorker, stable, wait_until
from tests.server.support import ServerProcess, status_count
from tests.server.test_classic_migration import stable_described
from tests.server.test_live import PARTITIONS, describe, setup

pytestmark = pytest.mark.integration

WAIT_S = 90
#: The server's settings here: tests/server/support.py's FAST with a 20 s session timeout.
SESSION_MS = 20_000
SERVER_ARGS = (
    "--session-timeout-ms",
    str(SESSION_MS),
    "--heartbeat-interval-ms",
    "500",
    "--status-interval-s",
    "1",
)
#: The server's session timeout in its status lines (one a second), with room to spare: that
#: many lines after the restart, a member that had not heartbeated to the new process would be gone.
SESSION_LINES = SESSION_MS // 1000 + 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Seen:
    """What the drill saw, for the assertions (and the report when one fails)."""

    before: DescribedGroup
    after: DescribedGroup
    members_before: dict[str, tuple[str, int]]
    members_after: dict[str, tuple[str, int]]
    history_before: int
    history_after: int
    commits_after: int
    heartbeats_after: int


def _since_start(server: ServerProcess) -> list[str]:
    """The status lines of the running process (after its last ``listening on``)."""
    lines = list(server.lines)
    start = max((i for i, line in enumerate(lines) if "listening on" in line), default=0)
    return [line for line in lines[start:] if line.startswith("status:")]


def _ids_and_epochs(workers: dict[str, StreamtasksWorker]) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for name, w in workers.items():
        assert w.consumer is not None
        out[name] = (w.consumer.member_id, w.consumer.generation)
    return out


def _coordinator_known(workers: dict[str, StreamtasksWorker]) -> bool:
    return all(w.consumer is not None and w.consumer._member.coordinator_known for w in workers.values())


async def kill_and_restart(
    kafka: Cluster, server: ServerProcess, *, client_side: bool, down_s: float
) -> tuple[Audit, Seen]:
    topic, group, partitions, audit = setup(kafka, server)
    producer = SteadyProducer(
        kafka.bootstrap_servers, topic, audit, partitions=PARTITIONS, record_ids="offset"
    )
    await producer.start()
    assignors: dict[str, Any] = {"partition_assignors": [RangeAssignor()]} if client_side else {}
    workers = {
        name: StreamtasksWorker(
            name,
            audit,
            topic,
            record_ids="offset",
            bootstrap_servers=server.address,
            group_id=group,
            group_protocol="consumer",
            session_timeout_ms=60_000,  # only if the server's could not be read
            **assignors,
        )
        for name in ("st1", "st2")
    }
    try:
        for w in workers.values():
            await w.start()
        await wait_until(
            stable(audit, partitions, set(workers)), WAIT_S, "two members sharing the partitions"
        )
        await wait_until(lambda: status_count(server, "commits") > 0, WAIT_S, "commits on the server")
        before = await stable_described(server, group)
        members_before = _ids_and_epochs(workers)
        history_before = len(audit.history)
        await asyncio.to_thread(server.kill)
        # The outage (what the drill is about, not a synchronization): members keep consuming
        # what they own while nobody answers their heartbeats and commits.
        await asyncio.sleep(down_s)
        await asyncio.to_thread(server.start)
        await wait_until(lambda: _coordinator_known(workers), WAIT_S, "every member to find the new server")
        await wait_until(
            lambda: len(_since_start(server)) >= SESSION_LINES,
            WAIT_S,
            "the restarted server to run past its session timeout",
        )
        after = await describe(server, group)
        members_after = _ids_and_epochs(workers)
        history_after = len(audit.history)
        # the status line of the new process: its counters started at 0
        commits_after, heartbeats_after = status_count(server, "commits"), status_count(server, "heartbeats")
        await producer.stop()
        await wait_until(lambda: not audit.records.lost(), WAIT_S, "every record consumed")
    finally:
        for w in workers.values():
            with contextlib.suppress(Exception):
                await w.stop()
    return audit, Seen(
        before=before,
        after=after,
        members_before=members_before,
        members_after=members_after,
        history_before=history_before,
        history_after=history_after,
        commits_after=commits_after,
        heartbeats_after=heartbeats_after,
    )


def _members(group: DescribedGroup) -> dict[str, tuple[int, tuple[Any, ...]]]:
    return {m.member_id: (m.member_epoch, m.assignment.topic_partitions) for m in group.members}


@pytest.mark.parametrize(
    ("client_side", "down_s"),
    [(True, 0.0), (True, 3.0), (False, 1.0)],
    ids=["range-restart-at-once", "range-down-3s", "server-assignor-down-1s"],
)
def test_streamtasks_members_survive_a_killed_server(
    kafka: Cluster, client_side: bool, down_s: float
) -> None:
    server = ServerProcess(kafka.bootstrap_servers, extra=SERVER_ARGS).start()
    try:
        audit, seen = asyncio.run(kill_and_restart(kafka, server, client_side=client_side, down_s=down_s))
    finally:
        server.stop()
    assert len(seen.before.members) == 2, seen.before
    if client_side:
        assert seen.before.assignor_name == "range"
    # each member kept its id and epoch, and the server has them as before, one session timeout on
    assert seen.members_after == seen.members_before
    assert _members(seen.after) == _members(seen.before), (seen.before, seen.after)
    assert seen.after.group_epoch == seen.before.group_epoch
    # no partition moved: no callback (assigned, revoked, lost) since the kill
    assert seen.history_after == seen.history_before, audit.timeline()
    assert seen.heartbeats_after > 0
    assert seen.commits_after > 0  # commits resumed against the new process
    assert audit.ledger.report(0).violations == (), audit.timeline()
    assert audit.records.lost() == []
    assert audit.records.produced_count > 0
