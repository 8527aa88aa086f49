"""Property: whatever the broker answers, in whatever order, the member never crashes on a
broker event, its owned partitions are exactly what its AssignmentChanged actions say, and
listener calls only ever name partitions it owned (revoked / lost) or owns (assigned)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import event as note_event
from hypothesis import given
from hypothesis import strategies as st

from assignors.partition.range import RangeAssignor
from assignors.partition.sticky import CooperativeStickyAssignor
from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic import (
    Action,
    AssignmentChanged,
    ClassicMember,
    CommitOffsets,
    CoordinatorDiscovered,
    EnforceRebalance,
    FindCoordinator,
    InvokeListener,
    Leave,
    ListenerKind,
    MemberState,
    MetadataUpdated,
    RequestFailed,
    ResponseReceived,
    SendRequest,
    Subscribe,
)
from streamtasks.membership.classic.transitions import USER_EVENTS
from streamtasks.protocol.classic_group import (
    DescribedMember,
    DescribeGroupRequest,
    DescribeGroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.consumer_protocol import ConsumerProtocolSubscription, encode_subscription
from tests.membership.classic.helpers import E, assignment_bytes, config, tps
from topology.ids import TopicPartition

ERRORS = [
    *[E.NONE] * 16,
    E.REBALANCE_IN_PROGRESS,
    E.UNKNOWN_MEMBER_ID,
    E.ILLEGAL_GENERATION,
    E.NOT_COORDINATOR,
    E.COORDINATOR_LOAD_IN_PROGRESS,
    E.MEMBER_ID_REQUIRED,
    E.UNKNOWN_SERVER_ERROR,
    E.REQUEST_TIMED_OUT,
    E.FENCED_INSTANCE_ID,
]
PARTITIONS = tps("t0 t1 t2 t3 u0 u1")
STEPS = ["answer"] * 6 + ["poll", "poll", "time", "fail", "dup", "user"]


@dataclass
class World:
    member: ClassicMember
    pending: list[Action] = field(default_factory=list)
    answered: list[tuple[int, object]] = field(default_factory=list)
    owned: frozenset[TopicPartition] = frozenset()
    now: int = 0
    generation: int = 0

    def check(self, actions: list[Action]) -> None:
        for a in actions:
            if isinstance(a, InvokeListener):
                if a.kind is ListenerKind.ASSIGNED:
                    continue
                assert set(a.partitions) <= self.owned, (a, self.owned)
                assert a.partitions, "revoked / lost are only called when non-empty"
            elif isinstance(a, AssignmentChanged):
                assert set(a.removed) <= self.owned
                assert not set(a.added) & self.owned
                self.owned = frozenset(a.owned)
            if isinstance(a, (SendRequest, CommitOffsets, FindCoordinator)):
                self.pending.append(a)
        for a in actions:
            if isinstance(a, InvokeListener) and a.kind is ListenerKind.ASSIGNED:
                assert set(a.partitions) <= self.owned
        assert self.member.owned_partitions == self.owned
        if self.member.state in (MemberState.CLOSED, MemberState.FAILED, MemberState.UNJOINED):
            assert not self.owned


def response_for(world: World, action: Action, data: st.DataObject) -> object:
    error = data.draw(st.sampled_from(ERRORS))
    if isinstance(action, CommitOffsets):
        return OffsetCommitResponse(errors=tuple((p, error) for p in action.partitions))
    assert isinstance(action, SendRequest)
    req = action.request
    if isinstance(req, JoinGroupRequest):
        if error is not E.NONE:
            return JoinGroupResponse(error=error, member_id="m1")
        world.generation += data.draw(st.integers(0, 2))
        leader = data.draw(st.sampled_from(["m1", "m0"]))
        other = encode_subscription(
            ConsumerProtocolSubscription(
                topics=("t", "u"),
                user_data=None,
                owned_partitions=tuple(data.draw(st.sets(st.sampled_from(PARTITIONS)))),
                generation_id=data.draw(st.integers(-1, world.generation)),
            )
        )
        members = (
            JoinGroupMember(member_id="m1", group_instance_id=None, metadata=req.protocols[0].metadata),
            JoinGroupMember(
                member_id="m0", group_instance_id=None, metadata=data.draw(st.sampled_from([other, b"\x01"]))
            ),
        )
        return JoinGroupResponse(
            error=E.NONE,
            generation_id=world.generation,
            protocol_name=data.draw(
                st.sampled_from([req.protocols[0].name] * 4 + [req.protocols[-1].name, "bogus"])
            ),
            leader=leader,
            member_id="m1",
            members=members if leader == "m1" else (),
            skip_assignment=data.draw(st.booleans()),
        )
    if isinstance(req, SyncGroupRequest):
        if error is not E.NONE:
            return SyncGroupResponse(error=error)
        payload = data.draw(
            st.one_of(
                st.sets(st.sampled_from(PARTITIONS)).map(lambda s: assignment_bytes(sorted(s))),
                st.binary(max_size=12),
                st.sets(st.sampled_from(PARTITIONS)).map(lambda s: assignment_bytes(sorted(s))),
            )
        )
        return SyncGroupResponse(error=E.NONE, protocol_name=req.protocol_name, assignment=payload)
    if isinstance(req, HeartbeatRequest):
        return HeartbeatResponse(error=error)
    if isinstance(req, DescribeGroupRequest):
        assignments = st.one_of(
            st.sets(st.sampled_from(PARTITIONS)).map(lambda s: assignment_bytes(sorted(s))),
            st.binary(max_size=12),
        )
        return DescribeGroupResponse(
            error=error,
            group_state=data.draw(st.sampled_from(["Stable", "PreparingRebalance", "", "Dead"])),
            members=tuple(
                DescribedMember(member_id=m, assignment=data.draw(assignments)) for m in ("m0", "m1")
            ),
        )
    assert isinstance(req, LeaveGroupRequest)
    return LeaveGroupResponse(error=error)


@given(
    data=st.data(),
    cooperative=st.booleans(),
    static=st.booleans(),
    marker=st.booleans(),
)
def test_member_survives_any_broker_behaviour(
    data: st.DataObject, cooperative: bool, static: bool, marker: bool
) -> None:
    assignors = (
        (CooperativeStickyAssignor(),) if cooperative else (CooperativeStickyAssignor(), RangeAssignor())
    )
    member = ClassicMember(
        config(
            assignors=assignors,
            topics=("t", "u"),
            group_instance_id="i1" if static else None,
            generation_marker=marker,
        )
    )
    world = World(member=member)
    for _ in range(data.draw(st.integers(1, 80))):
        step = data.draw(st.sampled_from(STEPS))
        world.now += data.draw(st.integers(0, 3_000)) if step == "time" else 1
        actions: list[Action] = []
        if step in ("poll", "time"):
            actions = member.poll(world.now)
            deadline = member.next_deadline_ms()
            assert deadline is None or isinstance(deadline, int)
        elif step in ("answer", "fail") and world.pending:
            action = world.pending.pop(data.draw(st.integers(0, len(world.pending) - 1)))
            if isinstance(action, FindCoordinator):
                event: object = (
                    CoordinatorDiscovered(request_id=action.request_id)
                    if step == "answer"
                    else RequestFailed(request_id=action.request_id)
                )
            elif step == "answer":
                event = ResponseReceived(
                    request_id=action.request_id, response=response_for(world, action, data)
                )
                world.answered.append((action.request_id, event))
            else:
                event = RequestFailed(request_id=action.request_id, error=E.NETWORK_EXCEPTION)
            actions = member.handle(event, world.now)
        elif step == "dup" and world.answered:
            _, event = world.answered[data.draw(st.integers(0, len(world.answered) - 1))]
            actions = member.handle(event, world.now)
        elif step == "user":
            user = data.draw(
                st.sampled_from(
                    [
                        Subscribe(topics=("t",)),
                        Subscribe(topics=("t", "u")),
                        EnforceRebalance(reason="x"),
                        Leave(reason="bye"),
                        EnforceRebalance(reason="y"),
                        MetadataUpdated(partitions_per_topic={"t": 4, "u": 2}),
                        MetadataUpdated(partitions_per_topic={"t": 4, "u": 2}),
                        MetadataUpdated(partitions_per_topic={"t": 2}),
                    ]
                )
            )
            allowed = USER_EVENTS.get(type(user))
            if allowed is not None and member.state not in allowed:
                try:
                    member.handle(user, world.now)
                except LocalProtocolError:
                    continue
                raise AssertionError(f"{user} accepted in {member.state}")
            actions = member.handle(user, world.now)
        world.check(actions)
        note_event(f"reached {member.state.name}")
