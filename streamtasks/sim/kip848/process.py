"""Simulated consumer processes of the KIP-848 world: the real member machine of either protocol
and its application state (what it consumes, what it committed), as the classic simulator's
``SimProcess``.

:class:`ConsumerProcess` runs a KIP-848 :class:`ConsumerMember`; :class:`ClassicProcess` runs a
classic-protocol :class:`ClassicMember` (a mixed group: its JoinGroup / SyncGroup / Heartbeat /
LeaveGroup go to the coordinator's classic writes). The member host drives both through the
same methods (:class:`~streamtasks.sim.process.HostedProcess`), each turning them into its own
machine's events.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from streamtasks.membership import classic
from streamtasks.membership.consumer import Action as ConsumerAction
from streamtasks.membership.consumer import ConsumerMember, ConsumerMemberConfig, MemberState
from streamtasks.membership.consumer import MetadataUpdated as ConsumerMetadata
from streamtasks.membership.consumer import ResponseReceived as ConsumerResponse
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.process import HostedProcess
from topology.ids import TopicPartition

__all__ = ["AnyAction", "ClassicProcess", "ConsumerProcess", "WorldProcess"]

#: What either machine asks its driver to do.
AnyAction = ConsumerAction | classic.SendRequest


class WorldProcess(HostedProcess):
    """A member incarnation of the KIP-848 world; subclasses hold the member machine."""

    def __init__(self, *, name: str, incarnation: int, static: bool) -> None:
        super().__init__(name=name, incarnation=incarnation, static=static)
        #: The highest member epoch seen since the member last (re)joined at epoch 0.
        self.max_epoch = 0

    @property
    def epoch(self) -> int:
        """The member epoch (a classic member's generation; 0 when it has none)."""
        raise NotImplementedError

    @property
    def settled(self) -> bool:
        """Stable, with nothing to rejoin for."""
        raise NotImplementedError

    @property
    def lapsed_taken_back(self) -> int:
        """Lapsed epochs a coordinator vouched for (KIP-848 members: ``consumer/lapse.py``)."""
        return 0


class ConsumerProcess(WorldProcess):
    """A KIP-848 member (``group.protocol=consumer``)."""

    group_protocol = "consumer"

    def __init__(self, *, name: str, incarnation: int, config: ConsumerMemberConfig, now_ms: int) -> None:
        super().__init__(name=name, incarnation=incarnation, static=config.group_instance_id is not None)
        self.config = config
        self.member = ConsumerMember(config, now_ms)

    @property
    def lapsed_taken_back(self) -> int:
        return self.member.lapsed_taken_back

    @property
    def member_id(self) -> str:
        return self.member.member_id

    @property
    def epoch(self) -> int:
        return self.member.member_epoch

    @property
    def owned(self) -> frozenset[TopicPartition]:
        return self.member.owned_partitions

    @property
    def settled(self) -> bool:
        return self.member.state is MemberState.STABLE

    @property
    def done(self) -> bool:
        return self.member.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL)

    @property
    def state_name(self) -> str:
        return self.member.state.value

    def respond(self, request_id: int, response: Any, now_ms: int) -> list[AnyAction]:
        return list(self.member.handle(ConsumerResponse(request_id=request_id, response=response), now_ms))

    def found(self, request_id: int, now_ms: int) -> list[AnyAction]:
        return list(self.member.handle(classic.CoordinatorDiscovered(request_id=request_id), now_ms))

    def lookup_failed(self, request_id: int, error: KafkaErrorCode, now_ms: int) -> list[AnyAction]:
        return list(self.member.handle(classic.RequestFailed(request_id=request_id, error=error), now_ms))

    def metadata(self, counts: Mapping[str, int], ids: Mapping[str, UUID], now_ms: int) -> list[AnyAction]:
        event = ConsumerMetadata(partitions_per_topic=dict(counts), topic_ids=dict(ids))
        return list(self.member.handle(event, now_ms))

    def leave(self, now_ms: int) -> list[AnyAction]:
        return list(self.member.handle(classic.Leave(reason="scenario"), now_ms))

    def enforce(self, now_ms: int, reason: str = "scenario") -> bool:
        return self.member.enforce_rebalance(reason, now_ms)

    def poll(self, now_ms: int) -> list[AnyAction]:
        return list(self.member.poll(now_ms))

    def next_deadline_ms(self) -> int | None:
        return self.member.next_deadline_ms()


class ClassicProcess(WorldProcess):
    """A classic-protocol member in the consumer group (a mixed group, KIP-848's online
    migration): the real :class:`ClassicMember`, subscribed at start."""

    group_protocol = "classic"

    def __init__(self, *, name: str, incarnation: int, config: classic.MemberConfig, now_ms: int) -> None:
        super().__init__(name=name, incarnation=incarnation, static=config.group_instance_id is not None)
        self.config = config
        self.member = classic.ClassicMember(config, now_ms)
        self._subscribed = False

    @property
    def member_id(self) -> str:
        return self.member.member_id

    @property
    def epoch(self) -> int:
        return max(self.member.generation, 0)

    @property
    def owned(self) -> frozenset[TopicPartition]:
        return self.member.owned_partitions

    @property
    def settled(self) -> bool:
        return self.member.state is classic.MemberState.STABLE and not self.member.rejoin_needed

    @property
    def done(self) -> bool:
        return self.member.state in (classic.MemberState.CLOSED, classic.MemberState.FAILED)

    @property
    def state_name(self) -> str:
        return f"classic {self.member.state.value}"

    def respond(self, request_id: int, response: Any, now_ms: int) -> list[AnyAction]:
        event = classic.ResponseReceived(request_id=request_id, response=response)
        return list(self.member.handle(event, now_ms))

    def found(self, request_id: int, now_ms: int) -> list[AnyAction]:
        return list(self.member.handle(classic.CoordinatorDiscovered(request_id=request_id), now_ms))

    def lookup_failed(self, request_id: int, error: KafkaErrorCode, now_ms: int) -> list[AnyAction]:
        return list(self.member.handle(classic.RequestFailed(request_id=request_id, error=error), now_ms))

    def metadata(self, counts: Mapping[str, int], ids: Mapping[str, UUID], now_ms: int) -> list[AnyAction]:
        out: list[AnyAction] = list(
            self.member.handle(classic.MetadataUpdated(partitions_per_topic=dict(counts)), now_ms)
        )
        if not self._subscribed:  # at start: metadata first, then the subscription
            self._subscribed = True
            out += self.member.handle(classic.Subscribe(topics=self.config.topics), now_ms)
        return out

    def leave(self, now_ms: int) -> list[AnyAction]:
        return list(self.member.handle(classic.Leave(reason="scenario"), now_ms))

    def enforce(self, now_ms: int, reason: str = "scenario") -> bool:
        return self.member.enforce_rebalance(reason)

    def poll(self, now_ms: int) -> list[AnyAction]:
        return list(self.member.poll(now_ms))

    def next_deadline_ms(self) -> int | None:
        return self.member.next_deadline_ms()
