"""The coordinator's process dies with requests in flight and a new one loads the group from
the log (``streamtasks coordinator`` killed with -9 and restarted; the live drill is
``tests/server/test_failover_members.py``): a member keeps its epoch and partitions through the
outage, looks the coordinator up again until it answers, and heartbeats to the new one at the
epoch it had, a full heartbeat; the new coordinator keeps it past its session timeout, and
nothing moves."""

from __future__ import annotations

from typing import Any

import pytest

from assignors.partition.range import RangeAssignor
from streamtasks.membership.classic import FindCoordinator
from streamtasks.membership.consumer import MemberState
from streamtasks.protocol.assignment_rpc import ConsumerGroupPrepareAssignmentRequest
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from tests.membership.consumer.helpers import Cluster, Node

SESSION_MS = 10_000  # the helpers' coordinator and members


def stable_pair(**config: Any) -> Cluster:
    c = Cluster()
    c.add("a", **config)
    c.add("b", **config)
    c.run(4_000)
    assert {n.member.state for n in c.nodes.values()} == {MemberState.STABLE}
    c.assert_exclusive()
    return c


def heartbeats(node: Node) -> list[ConsumerGroupHeartbeatRequest]:
    return [r for r in node.sent if isinstance(r, ConsumerGroupHeartbeatRequest)]


def finds(node: Node) -> int:
    return sum(isinstance(x, FindCoordinator) for x in node.actions)


@pytest.mark.parametrize(
    "config", [{}, {"client_assignors": (RangeAssignor(),)}], ids=["server-assignor", "client-side-range"]
)
def test_heartbeat_in_flight_when_the_coordinator_dies_then_it_comes_back_from_its_log(
    config: dict[str, Any],
) -> None:
    c = stable_pair(**config)
    a, b = c.nodes["a"], c.nodes["b"]
    before = {n: (c.owned(n), c.nodes[n].member.member_epoch) for n in c.nodes}
    group_epoch = c.group().group_epoch
    a.hold = True
    c.run(1_500)  # a's heartbeat goes out and stays unanswered
    assert heartbeats(a)[-1].member_epoch == before["a"][1]
    assert a.held
    for n in c.nodes.values():
        n.actions.clear()
        n.sent.clear()
        n.listener.clear()
    c.kill()  # a's connection drops under its heartbeat; b's next one finds nobody
    c.run(3_000)
    for name, n in c.nodes.items():
        assert not n.member.coordinator_known
        assert n.member.state is MemberState.STABLE  # partitions kept through the outage
        assert (c.owned(name), n.member.member_epoch) == before[name]
        # looked up again and again, never given up: 100, 200, 400, 800 ms apart, then every
        # second (retry.backoff.max.ms), not every 100 ms (30 lookups)
        assert 5 <= finds(n) <= 8
    for n in c.nodes.values():
        n.sent.clear()
    c.restart()
    c.run(1_000)
    for name, n in c.nodes.items():
        assert n.member.coordinator_known
        first = heartbeats(n)[0]  # the first the new process gets
        assert first.member_epoch == before[name][1]  # the epoch it had
        assert first.topic_partitions is not None  # full: the new process may have missed one
        assert first.rebalance_timeout_ms > 0
    c.run(SESSION_MS + 2_000)  # past the new coordinator's session timeout: both kept
    group = c.group()
    assert group.group_epoch == group_epoch
    assert {m: (c.owned(m), c.nodes[m].member.member_epoch) for m in c.nodes} == before
    assert sorted(group.members) == ["a", "b"]
    assert all(n.member.state is MemberState.STABLE for n in c.nodes.values())
    assert a.listener == b.listener == []  # no revoked, lost or assigned callback
    c.assert_exclusive()
    assert not any(isinstance(r, ConsumerGroupPrepareAssignmentRequest) for r in a.sent + b.sent)
