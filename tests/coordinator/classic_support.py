"""Classic-protocol test clients beside the KIP-848 ones of :mod:`tests.coordinator.support`.

A :class:`Classic` client behaves as the Java consumer does against a consumer group: an eager
one revokes everything before it joins, a cooperative one keeps what it owns, reports it in its
subscription, revokes what the SyncGroup result leaves out and then rejoins; a heartbeat
answered REBALANCE_IN_PROGRESS makes it rejoin; ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID make it
lose everything and join afresh. A parked join is answered through the write results'
``joins``, which :meth:`ClassicHarness.apply` hands to the client (it then syncs at once)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from streamtasks.coordinator import CoordinatorConfig, Result
from streamtasks.coordinator.classic import LeaveGroupMember, LeaveGroupsRequest, LeaveGroupsResponse
from streamtasks.coordinator.parked import AnswerJoin
from streamtasks.protocol.classic_group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    ProtocolMetadata,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.consumer_protocol import (
    ConsumerProtocolSubscription,
    decode_assignment,
    encode_subscription,
)
from streamtasks.protocol.errors import KafkaErrorCode
from tests.coordinator.support import GROUP, Harness, topic_id
from topology.ids import TopicPartition

R = TypeVar("R")


@dataclass
class Classic:
    name: str
    topics: tuple[str, ...] = ("foo",)
    cooperative: bool = True
    instance_id: str | None = None
    member_id: str = ""
    generation: int = -1
    owned: frozenset[TopicPartition] = frozenset()
    parked: bool = False
    needs_rejoin: bool = True
    joins: int = 0
    history: list[Any] = field(default_factory=list)

    @property
    def protocol(self) -> str:
        return "cooperative-sticky" if self.cooperative else "range"


class ClassicHarness(Harness):
    def __init__(
        self,
        topics: Mapping[str, int] | None = None,
        *,
        config: CoordinatorConfig | None = None,
        assignors: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(topics, config=config, assignors=assignors)
        self.classic: dict[str, Classic] = {}
        self._ids = 0
        self._answers: list[AnswerJoin] = []
        self._delivering = False

    # -- applying results: parked joins answered are delivered to their clients ------------------

    def apply(self, result: Result[R]) -> R:
        response = super().apply(result)
        self._answers += [op for op in result.joins if isinstance(op, AnswerJoin)]
        if not self._delivering:
            self._delivering = True
            try:
                while self._answers:
                    answer = self._answers.pop(0)
                    client = self._by_member_id(answer.member_id)
                    if client is not None and client.parked:
                        client.parked = False
                        self._joined(client, answer.response)
            finally:
                self._delivering = False
        return response

    def advance(self, ms: int) -> list[Result[None]]:
        self.now += ms
        done = []
        for key in self.coordinator.expired_timers(self.now):
            result = self.coordinator.on_timer(key, self.now)
            self.apply(result)
            done.append(result)
        return done

    def _by_member_id(self, member_id: str) -> Classic | None:
        for client in self.classic.values():
            if client.member_id == member_id:
                return client
        return None

    # -- the client ---------------------------------------------------------------------------------

    def add(self, name: str, **kwargs: Any) -> Classic:
        client = self.classic[name] = Classic(name, **kwargs)
        return client

    def subscription(self, client: Classic, *, version: int = 3) -> bytes:
        return encode_subscription(
            ConsumerProtocolSubscription(
                topics=client.topics,
                user_data=None,
                owned_partitions=tuple(sorted(client.owned)),
                generation_id=client.generation,
            ),
            version,
        )

    def join_request(
        self, client: Classic, *, protocols: tuple[ProtocolMetadata, ...] | None = None
    ) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id=GROUP,
            member_id=client.member_id,
            group_instance_id=client.instance_id,
            session_timeout_ms=10_000,
            rebalance_timeout_ms=30_000,
            protocol_type="consumer",
            protocols=protocols
            or (ProtocolMetadata(name=client.protocol, metadata=self.subscription(client)),),
        )

    def cjoin(self, name: str, **request_changes: Any) -> JoinGroupResponse | None:
        """The client (re)joins; None while its join is parked."""
        client = self.classic[name]
        if not client.cooperative:
            client.owned = frozenset()  # eager: everything is revoked before the join
        client.joins += 1
        request = self.join_request(client)
        if request_changes:
            request = replace(request, **request_changes)
        self._ids += 1
        new_id = f"{name}-{self._ids}"
        response = self.apply(
            self.coordinator.join_group(request, self.now, new_member_id=new_id, api_version=9)
        )
        if response is None:
            # (the client learns its member id from the answer; the model keeps it to match it)
            client.member_id = client.member_id or new_id
            client.parked = True
            client.needs_rejoin = False
            return None
        if response.error is KafkaErrorCode.MEMBER_ID_REQUIRED:
            client.member_id = response.member_id
            return self.cjoin(name, **request_changes)
        self._joined(client, response)
        return response

    def _joined(self, client: Classic, response: JoinGroupResponse) -> None:
        client.history.append(response)
        if response.error is not KafkaErrorCode.NONE:
            self._lost(client)
            return
        client.member_id = response.member_id
        client.generation = response.generation_id
        client.needs_rejoin = False
        self.csync(client.name)

    def _lost(self, client: Classic) -> None:
        client.owned = frozenset()
        client.generation = -1
        if client.instance_id is None:
            client.member_id = ""
        client.needs_rejoin = True

    def csync(self, name: str) -> SyncGroupResponse:
        client = self.classic[name]
        response = self.apply(
            self.coordinator.sync_group(
                SyncGroupRequest(
                    group_id=GROUP,
                    generation_id=client.generation,
                    member_id=client.member_id,
                    group_instance_id=client.instance_id,
                    protocol_type="consumer",
                    protocol_name=client.protocol,
                ),
                self.now,
            )
        )
        client.history.append(response)
        if response.error is KafkaErrorCode.REBALANCE_IN_PROGRESS:
            client.needs_rejoin = True
            return response
        if response.error is not KafkaErrorCode.NONE:
            self._lost(client)
            return response
        assigned = frozenset(decode_assignment(response.assignment).assigned_partitions)
        revoked = client.owned - assigned
        client.owned = assigned
        if revoked:
            client.needs_rejoin = True
        return response

    def chb(self, name: str) -> HeartbeatResponse:
        client = self.classic[name]
        response = self.apply(
            self.coordinator.classic_heartbeat(
                HeartbeatRequest(
                    group_id=GROUP,
                    generation_id=client.generation,
                    member_id=client.member_id,
                    group_instance_id=client.instance_id,
                ),
                self.now,
            )
        )
        if response.error is KafkaErrorCode.REBALANCE_IN_PROGRESS:
            client.needs_rejoin = True
        elif response.error is not KafkaErrorCode.NONE:
            self._lost(client)
        return response

    def cleave(self, name: str) -> LeaveGroupsResponse:
        client = self.classic[name]
        response = self.apply(
            self.coordinator.leave_group(
                LeaveGroupsRequest(
                    group_id=GROUP,
                    members=(LeaveGroupMember(member_id=client.member_id, instance_id=client.instance_id),),
                ),
                self.now,
            )
        )
        client.owned = frozenset()
        del self.classic[name]
        return response

    def step(self, name: str) -> None:
        """What the client does next: rejoin if it must, else heartbeat (nothing while parked)."""
        client = self.classic[name]
        if client.parked:
            return
        if client.needs_rejoin:
            self.cjoin(name)
        else:
            self.chb(name)

    def settle_all(self, rounds: int = 8) -> None:
        """Every classic client steps and every KIP-848 member heartbeats, ``rounds`` times;
        ownership is checked after every request."""
        for _ in range(rounds):
            for name in sorted(self.classic):
                self.step(name)
                self.check_owners()
            for member_id in sorted(self.members):
                if self.group is not None and self.group.member(member_id) is not None:
                    self.heartbeat(member_id)
                    self.check_owners()

    def check_owners(self) -> None:
        """No partition is owned by two clients (what each client believes it owns)."""
        seen: dict[tuple[Any, int], str] = {}
        for client in self.classic.values():
            if self.group is None or self.group.member(client.member_id) is None:
                continue  # removed (its session ran out): it learns so at its next request
            for tp in client.owned:
                pair = (topic_id(tp.topic), tp.partition)
                assert pair not in seen, f"{tp} owned by {seen[pair]} and {client.name}"
                seen[pair] = client.name
        for member_id, member in self.members.items():
            if self.group is None or self.group.member(member_id) is None:
                continue
            for pair in member.owned.pairs():
                assert pair not in seen, f"{pair} owned by {seen[pair]} and {member_id}"
                seen[pair] = member_id

    def forget_removed(self) -> None:
        """Clients the coordinator removed (timers) lose their partitions and rejoin, as they do
        at their next request; KIP-848 members too."""
        group = self.group
        for client in self.classic.values():
            if group is None or group.member(client.member_id) is None:
                client.parked = False
                self._lost(client)
        for member_id in list(self.members):
            if group is None or group.member(member_id) is None:
                self.join(member_id)

    def owned_by(self, name: str) -> list[tuple[str, int]]:
        return sorted((tp.topic, tp.partition) for tp in self.classic[name].owned)
