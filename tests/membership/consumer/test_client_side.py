"""The client-side assignor path: ShouldComputeAssignment → PrepareAssignment → the assignor →
InstallAssignment, against the real coordinator."""

from __future__ import annotations

from typing import Any, ClassVar

from assignors.partition.range import RangeAssignor
from assignors.partition.types import GroupAssignment, GroupSubscription, RebalanceProtocol
from streamtasks.membership.classic import AssignmentChanged
from streamtasks.membership.consumer import AssignorMetadataChanged, MemberState
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.userdata import LATEST_VERSION, decode_assignment_info
from tests.ids import tps
from tests.membership.consumer.helpers import Cluster, streams_member
from topology import TopologyBuilder

ALL = tps("foo-0", "foo-1", "foo-2", "foo-3")


def sent(node: Any, kind: type) -> list[Any]:
    return [r for r in node.sent if isinstance(r, kind)]


def test_joining_stays_joining_until_the_first_target_exists() -> None:
    c = Cluster()
    a = c.add("a", client_assignors=(RangeAssignor(),))
    a.hold = True
    c.tick()
    c.tick()
    c.release("a")  # the join answer: epoch 0, asked to compute
    assert a.member.state is MemberState.JOINING
    assert a.member.member_epoch == 0
    c.run(2_000)
    assert a.member.state is MemberState.STABLE
    assert c.owned("a") == ALL
    joins = [h for h in sent(a, ConsumerGroupHeartbeatRequest) if h.member_epoch == 0]
    assert all(h.rebalance_timeout_ms > 0 and h.subscribed_topic_names == ("foo",) for h in joins)


def test_should_compute_runs_prepare_then_install() -> None:
    c = Cluster()
    a = c.add("a", client_assignors=(RangeAssignor(),))
    b = c.add("b", client_assignors=(RangeAssignor(),))
    c.run(4_000)
    c.assert_exclusive()
    assert c.owned("a") | c.owned("b") == ALL
    assert len(c.owned("a")) == len(c.owned("b")) == 2
    # each member's heartbeat that bumped the epoch got it asked: b computes its own join's
    installs = [
        (i.group_epoch, n.member.member_id, i)
        for n in (a, b)
        for i in sent(n, ConsumerGroupInstallAssignmentRequest)
    ]
    _, computing_id, install = max(installs, key=lambda t: t[0])
    computing = a if computing_id == "a" else b
    assert sent(computing, ConsumerGroupPrepareAssignmentRequest)
    assert install.group_epoch == c.group().assignment_epoch
    assert sorted(m.member_id for m in install.members) == ["a", "b"]
    assert computing.member.assignments_installed >= 1
    assert c.group().assignor_name == "range"


def test_stale_member_epoch_is_retried_after_the_next_heartbeat() -> None:
    c = Cluster()
    a = c.add("a", client_assignors=(RangeAssignor(),))
    original = c.write
    stale = {"left": 1}

    def write(request: Any) -> Any:
        if isinstance(request, ConsumerGroupPrepareAssignmentRequest) and stale["left"]:
            stale["left"] -= 1
            return ConsumerGroupPrepareAssignmentResponse(error=KafkaErrorCode.STALE_MEMBER_EPOCH)
        return original(request)

    c.write = write  # type: ignore[method-assign]
    c.run(4_000)
    assert len(sent(a, ConsumerGroupPrepareAssignmentRequest)) == 2
    assert not a.errors
    assert a.member.state is MemberState.STABLE
    assert c.owned("a") == ALL


def test_a_repeated_flag_is_ignored_while_computing() -> None:
    c = Cluster()
    a = c.add("a", client_assignors=(RangeAssignor(),))
    c.tick()
    original = c.answer
    held: list[Any] = []

    def answer(name: str, rid: int, request: Any) -> None:
        if isinstance(request, ConsumerGroupPrepareAssignmentRequest):
            held.append((name, rid, request))
            return
        original(name, rid, request)

    c.answer = answer  # type: ignore[method-assign]
    c.run(3_000)  # three more heartbeats, each answered ShouldComputeAssignment
    assert len(sent(a, ConsumerGroupPrepareAssignmentRequest)) == 1
    assert a.member.computing_assignment
    c.answer = original  # type: ignore[method-assign]
    for name, rid, request in held:
        c.answer(name, rid, request)
    c.run(2_000)
    assert c.owned("a") == ALL


class Incomplete:
    """Leaves partition 0 out: the member must not install that."""

    name: ClassVar[str] = "incomplete"
    version: ClassVar[int] = 0

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER,)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        first = sorted(group.members)[0]
        return GroupAssignment(members={first: tuple(sorted(ALL - tps("foo-0")))})


def test_an_incomplete_assignment_is_reported_and_not_installed() -> None:
    c = Cluster()
    a = c.add("a", client_assignors=(Incomplete(),))
    c.run(2_000)
    assert not sent(a, ConsumerGroupInstallAssignmentRequest)
    assert any("unassigned" in e.reason for e in a.errors)
    assert a.member.member_epoch == 0


def test_enforce_rebalance_steps_the_reason_and_bumps_the_epoch() -> None:
    c = Cluster()
    a = c.add("a", client_assignors=(RangeAssignor(),))
    c.run(3_000)
    epoch = c.group().group_epoch
    assert a.member.enforce_rebalance("lag", c.now) is True
    assert a.member.reasons == {"range": 1}
    c.run(2_000)
    reason_sent = [h for h in sent(a, ConsumerGroupHeartbeatRequest) if h.client_assignors]
    assert reason_sent[-1].client_assignors[0].reason == 1
    assert c.group().group_epoch > epoch
    assert a.member.state is MemberState.STABLE


def test_streams_assignor_runs_client_side_with_standbys_and_warmups() -> None:
    """KIP-441 through KIP-848: the second process gets standbys and warm-ups, not actives; once
    its metadata reports the warm-ups' state (caught up), the epoch bump moves two tasks to it."""
    builder = TopologyBuilder("app")
    builder.stream("foo").store("counts")
    topology = builder.build()
    c = Cluster()
    streams_member(c, "a", topology, {})
    c.run(3_000)
    streams_member(c, "b", topology, {})
    c.run(3_000)
    c.assert_exclusive()
    assert c.owned("a") == ALL
    info = decode_assignment_info(c.nodes["b"].member.assignment_user_data)
    assert not info.active_tasks
    assert info.standby_tasks
    assert info.warmup_tasks
    assert {t.partition for t in info.standby_tasks | info.warmup_tasks} == {0, 1, 2, 3}
    warm = sorted(info.warmup_tasks)
    caught_up = streams_member(c, "b", topology, {t: 100 for t in info.standby_tasks | info.warmup_tasks})
    c.handle("b", AssignorMetadataChanged(name="streamtasks", metadata=caught_up))
    c.run(4_000)
    c.assert_exclusive()
    assert c.owned("a") | c.owned("b") == ALL
    assert {tp.partition for tp in c.owned("b")} == {t.partition for t in warm}
    after = decode_assignment_info(c.nodes["b"].member.assignment_user_data)
    assert {t.partition for t in after.active_tasks} == {t.partition for t in warm}
    assert c.group().current("b").metadata_version == LATEST_VERSION
    # The old owner revokes under its ending epoch's metadata (final for the epoch, KIP-848),
    # which still names the moved tasks active there; the next epoch's names them standbys
    # (the app keeps them open meanwhile: tests/app/test_kip848_recycling.py).
    a = c.nodes["a"]
    changes = [x for x in a.actions if isinstance(x, AssignmentChanged)]
    revoking = [i for i, x in enumerate(changes) if x.removed]
    assert len(revoking) == 1
    change = changes[revoking[0]]
    moved = {tp.partition for tp in change.removed}
    assert moved == {t.partition for t in warm}
    told = decode_assignment_info(change.user_data)
    assert moved <= {t.partition for t in told.active_tasks}
    later = [x for x in changes[revoking[0] + 1 :] if x.generation > change.generation]
    assert later
    final = decode_assignment_info(later[-1].user_data)
    assert {t.partition for t in final.active_tasks} == {tp.partition for tp in change.owned}
    assert moved <= {t.partition for t in final.standby_tasks}
