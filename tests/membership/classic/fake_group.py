"""A deliberately small classic group coordinator for end-to-end tests of the member.

Answers at once (no network), one group, Kafka's rules reduced to what these tests need:
MEMBER_ID_REQUIRED for new dynamic members, a join barrier that waits for every member, the
first protocol every member offers (in the first member's order), generation bump, leader =
first member, SyncGroup parks followers until the leader's assignment arrives, heartbeats
answer REBALANCE_IN_PROGRESS / UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION. The simulator in
``streamtasks.sim`` is the full model; this is only a test double for the broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamtasks.membership.classic import (
    Action,
    AssignmentChanged,
    ClassicMember,
    CommitOffsets,
    CoordinatorDiscovered,
    Event,
    FindCoordinator,
    ResponseReceived,
    SendRequest,
)
from streamtasks.protocol.classic_group import (
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
from streamtasks.protocol.errors import KafkaErrorCode as E
from topology.ids import TopicPartition

__all__ = ["FakeGroup"]


@dataclass
class _Joined:
    member_id: str
    protocols: dict[str, bytes]
    order: list[str]


@dataclass
class FakeGroup:
    members: list[ClassicMember]
    generation: int = 0
    rebalancing: bool = False
    known: dict[str, _Joined] = field(default_factory=dict)
    joins: dict[str, tuple[int, int]] = field(default_factory=dict)  # member id -> (index, rid)
    syncs: dict[str, tuple[int, int]] = field(default_factory=dict)
    assignment: dict[str, bytes] = field(default_factory=dict)
    awaiting_sync: bool = False
    protocol: str | None = None
    leader: str = ""
    next_id: int = 0
    now: int = 0
    queue: list[tuple[int, Event]] = field(default_factory=list)
    log: list[tuple[int, Action]] = field(default_factory=list)
    rebalances: int = 0
    max_overlap_checks: int = 0

    # -- driver --------------------------------------------------------------------------

    def run(self, until_ms: int, step_ms: int = 100) -> None:
        while self.now <= until_ms:
            for i, member in enumerate(self.members):
                self._execute(i, member.poll(self.now))
            while self.queue:
                i, event = self.queue.pop(0)
                self._execute(i, self.members[i].handle(event, self.now))
            self.now += step_ms

    def owners(self) -> dict[TopicPartition, list[int]]:
        out: dict[TopicPartition, list[int]] = {}
        for i, m in enumerate(self.members):
            for tp in m.owned_partitions:
                out.setdefault(tp, []).append(i)
        return out

    def _execute(self, i: int, actions: list[Action]) -> None:
        for action in actions:
            self.log.append((i, action))
            if isinstance(action, FindCoordinator):
                self.queue.append((i, CoordinatorDiscovered(request_id=action.request_id)))
            elif isinstance(action, CommitOffsets):
                errors = tuple((p, E.NONE) for p in action.partitions)
                self.queue.append(
                    (
                        i,
                        ResponseReceived(
                            request_id=action.request_id, response=OffsetCommitResponse(errors=errors)
                        ),
                    )
                )
            elif isinstance(action, SendRequest):
                self._request(i, action.request_id, action.request)
            elif isinstance(action, AssignmentChanged):
                self.max_overlap_checks += 1
                doubled = {tp: o for tp, o in self.owners().items() if len(o) > 1}
                assert not doubled, f"partitions owned twice at {self.now}: {doubled}"

    def _reply(self, i: int, rid: int, response: object) -> None:
        self.queue.append((i, ResponseReceived(request_id=rid, response=response)))

    # -- coordinator ---------------------------------------------------------------------

    def _request(self, i: int, rid: int, req: object) -> None:
        if isinstance(req, JoinGroupRequest):
            self._join(i, rid, req)
        elif isinstance(req, SyncGroupRequest):
            self._sync(i, rid, req)
        elif isinstance(req, HeartbeatRequest):
            if req.member_id not in self.known:
                self._reply(i, rid, HeartbeatResponse(error=E.UNKNOWN_MEMBER_ID))
            elif req.generation_id != self.generation:
                self._reply(i, rid, HeartbeatResponse(error=E.ILLEGAL_GENERATION))
            elif self.rebalancing:
                self._reply(i, rid, HeartbeatResponse(error=E.REBALANCE_IN_PROGRESS))
            else:
                self._reply(i, rid, HeartbeatResponse(error=E.NONE))
        elif isinstance(req, LeaveGroupRequest):
            self.known.pop(req.member_id, None)
            self.joins.pop(req.member_id, None)
            self._reply(i, rid, LeaveGroupResponse(error=E.NONE))
            self._start_rebalance()
            self._maybe_complete_join()

    def _start_rebalance(self) -> None:
        if not self.rebalancing:
            self.rebalancing = True
            self.awaiting_sync = False
            for j, srid in [self.syncs[m] for m in sorted(self.syncs)]:
                self._reply(j, srid, SyncGroupResponse(error=E.REBALANCE_IN_PROGRESS))
            self.syncs.clear()

    def _join(self, i: int, rid: int, req: JoinGroupRequest) -> None:
        if not req.member_id:
            self.next_id += 1
            self._reply(i, rid, JoinGroupResponse(error=E.MEMBER_ID_REQUIRED, member_id=f"m{self.next_id}"))
            return
        protocols = {p.name: p.metadata for p in req.protocols}
        previous = self.known.get(req.member_id)
        self.known[req.member_id] = _Joined(req.member_id, protocols, [p.name for p in req.protocols])
        self.joins[req.member_id] = (i, rid)
        if (
            previous is None
            or previous.protocols != protocols
            or req.member_id == self.leader
            or self.rebalancing
        ):
            self._start_rebalance()
        elif not self.rebalancing:  # unchanged follower: current generation back
            del self.joins[req.member_id]
            self._reply(i, rid, self._join_response(req.member_id, ()))
            return
        self._maybe_complete_join()

    def _join_response(self, member_id: str, members: tuple[JoinGroupMember, ...]) -> JoinGroupResponse:
        return JoinGroupResponse(
            error=E.NONE,
            generation_id=self.generation,
            protocol_type="consumer",
            protocol_name=self.protocol,
            leader=self.leader,
            member_id=member_id,
            members=members,
        )

    def _maybe_complete_join(self) -> None:
        if not self.rebalancing or not self.known or set(self.joins) != set(self.known):
            return
        self.generation += 1
        self.rebalances += 1
        self.rebalancing = False
        self.awaiting_sync = True
        order = sorted(self.known)
        first = self.known[order[0]]
        self.protocol = next(p for p in first.order if all(p in self.known[m].protocols for m in order))
        if self.leader not in self.known:
            self.leader = order[0]
        members = tuple(
            JoinGroupMember(
                member_id=m, group_instance_id=None, metadata=self.known[m].protocols[self.protocol]
            )
            for m in order
        )
        for mid, (j, jrid) in sorted(self.joins.items()):
            self._reply(j, jrid, self._join_response(mid, members if mid == self.leader else ()))
        self.joins.clear()

    def _sync(self, i: int, rid: int, req: SyncGroupRequest) -> None:
        if req.member_id not in self.known:
            self._reply(i, rid, SyncGroupResponse(error=E.UNKNOWN_MEMBER_ID))
        elif req.generation_id != self.generation:
            self._reply(i, rid, SyncGroupResponse(error=E.ILLEGAL_GENERATION))
        elif self.rebalancing:
            self._reply(i, rid, SyncGroupResponse(error=E.REBALANCE_IN_PROGRESS))
        else:
            self.syncs[req.member_id] = (i, rid)
            if req.member_id == self.leader and self.awaiting_sync:
                self.assignment = {a.member_id: a.assignment for a in req.assignments}
                self.awaiting_sync = False
            if not self.awaiting_sync:
                for mid, (j, srid) in sorted(self.syncs.items()):
                    response = SyncGroupResponse(
                        error=E.NONE,
                        protocol_type="consumer",
                        protocol_name=self.protocol,
                        assignment=self.assignment.get(mid, b""),
                    )
                    self._reply(j, srid, response)
                self.syncs.clear()
