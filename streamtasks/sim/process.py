"""Simulated consumer processes: the real member state machine plus a tiny application.

The application consumes its owned partitions at a steady rate (its position in a partition is
the committed offset it started from plus one record per ``record_interval_ms`` owned), hands
the positions to the member's ``CommitOffsets`` actions, and applies the listener calls to the
ownership ledger. A process has incarnations: a crash ends one, a restart begins the next with
a fresh machine (a static member keeps its ``group_instance_id`` across them).

:class:`HostedProcess` is what the member host (:mod:`streamtasks.sim.host`) drives, whatever
the machine; :class:`SimProcess` runs a classic member against the classic coordinator model
(the KIP-848 world's processes are in :mod:`streamtasks.sim.kip848.process`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from assignors.partition.types import PartitionAssignor, RebalanceProtocol
from assignors.registry import get_partition_assignor
from streamtasks.membership.classic import (
    ClassicMember,
    CoordinatorDiscovered,
    Leave,
    MemberConfig,
    MemberState,
    MetadataUpdated,
    RequestFailed,
    ResponseReceived,
    Subscribe,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.apps import SimApp
from topology.ids import TopicPartition

__all__ = ["DeferredInput", "HostedProcess", "SimProcess", "make_assignor"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeferredInput:
    """Something that reached a paused process; handled in order when it resumes."""

    kind: str
    payload: object = None


class HostedProcess:
    """A member incarnation and its application state, as the host drives it. A subclass holds
    the member machine and turns the host's calls into that machine's events; each call
    returns the machine's actions."""

    #: The protocol the member speaks (``classic`` or ``consumer``; empty: the world's).
    group_protocol = ""

    def __init__(self, *, name: str, incarnation: int, static: bool) -> None:
        self.name = name
        self.incarnation = incarnation
        self.conn = f"{name}#{incarnation}"
        self.is_static = static
        self.alive = True
        self.leaving = False
        self.paused_until: int | None = None
        self.deferred: list[DeferredInput] = []
        self.wake_token: int | None = None
        self.wake_at: int | None = None
        self.same_ms_wakes = 0
        self.last_wake_ms = -1
        #: OffsetCommit requests in flight: request id → offsets sent.
        self.pending_commits: dict[int, dict[TopicPartition, int]] = {}
        #: Offsets this incarnation got accepted, per partition (latest).
        self.committed: dict[TopicPartition, int] = {}
        #: When this process was last told to lead with SkipAssignment (KIP-814).
        self.skip_assignment_at: int | None = None

    @property
    def paused(self) -> bool:
        return self.paused_until is not None

    # -- what the host and the checks read ------------------------------------------------

    @property
    def member_id(self) -> str:
        raise NotImplementedError

    @property
    def owned(self) -> frozenset[TopicPartition]:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        """Left or failed for good: the process stops."""
        raise NotImplementedError

    @property
    def state_name(self) -> str:
        raise NotImplementedError

    # -- what the host feeds ----------------------------------------------------------------

    def respond(self, request_id: int, response: object, now_ms: int) -> Sequence[object]:
        raise NotImplementedError

    def found(self, request_id: int, now_ms: int) -> Sequence[object]:
        raise NotImplementedError

    def lookup_failed(self, request_id: int, error: KafkaErrorCode, now_ms: int) -> Sequence[object]:
        raise NotImplementedError

    def metadata(self, counts: Mapping[str, int], ids: Mapping[str, UUID], now_ms: int) -> Sequence[object]:
        raise NotImplementedError

    def subscribe(self, counts: Mapping[str, int], now_ms: int) -> Sequence[object] | None:
        """At start, after the first metadata: the subscription's actions (None: the machine
        subscribed with its metadata, or from its configuration)."""
        return None

    def leave(self, now_ms: int) -> Sequence[object]:
        raise NotImplementedError

    def enforce(self, now_ms: int, reason: str = "scenario") -> bool:
        """Ask for a rebalance (KIP-568); False: one is under way already."""
        raise NotImplementedError

    def poll(self, now_ms: int) -> Sequence[object]:
        raise NotImplementedError

    def next_deadline_ms(self) -> int | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.conn}, alive={self.alive}, state={self.state_name})"


class SimProcess(HostedProcess):
    """A classic member against the classic coordinator model, with its application (if any)."""

    def __init__(
        self,
        *,
        name: str,
        incarnation: int,
        config: MemberConfig,
        started_ms: int = 0,
        app: SimApp | None = None,
    ) -> None:
        super().__init__(name=name, incarnation=incarnation, static=config.group_instance_id is not None)
        #: The application whose assignors the member runs (None: a plain consumer).
        self.app = app
        self.started_ms = started_ms
        self.config = config
        self.member = ClassicMember(config)
        self.protocol: RebalanceProtocol = config.protocol
        self.last_generation = -1

    @property
    def member_id(self) -> str:
        return self.member.member_id

    @property
    def owned(self) -> frozenset[TopicPartition]:
        return self.member.owned_partitions

    @property
    def done(self) -> bool:
        return self.member.state in (MemberState.CLOSED, MemberState.FAILED)

    @property
    def state_name(self) -> str:
        return self.member.state.value

    def respond(self, request_id: int, response: object, now_ms: int) -> Sequence[object]:
        return self.member.handle(ResponseReceived(request_id=request_id, response=response), now_ms)  # type: ignore[arg-type]

    def found(self, request_id: int, now_ms: int) -> Sequence[object]:
        return self.member.handle(CoordinatorDiscovered(request_id=request_id), now_ms)

    def lookup_failed(self, request_id: int, error: KafkaErrorCode, now_ms: int) -> Sequence[object]:
        return self.member.handle(RequestFailed(request_id=request_id, error=error), now_ms)

    def metadata(self, counts: Mapping[str, int], ids: Mapping[str, UUID], now_ms: int) -> Sequence[object]:
        return self.member.handle(MetadataUpdated(partitions_per_topic=dict(counts)), now_ms)

    def subscribe(self, counts: Mapping[str, int], now_ms: int) -> Sequence[object] | None:
        topics = tuple(counts) if self.app is None else self.app.topics
        return self.member.handle(Subscribe(topics=topics), now_ms)

    def leave(self, now_ms: int) -> Sequence[object]:
        return self.member.handle(Leave(reason="scenario"), now_ms)

    def enforce(self, now_ms: int, reason: str = "scenario") -> bool:
        return self.member.enforce_rebalance(reason)

    def poll(self, now_ms: int) -> Sequence[object]:
        return self.member.poll(now_ms)

    def next_deadline_ms(self) -> int | None:
        return self.member.next_deadline_ms()


_ASSIGNOR_TYPES: dict[str, type[PartitionAssignor]] = {}


def make_assignor(name: str) -> PartitionAssignor:
    """A fresh assignor; the registry lookup (entry points) is done once per name."""
    kind = _ASSIGNOR_TYPES.get(name)
    if kind is None:
        found = get_partition_assignor(name)
        _ASSIGNOR_TYPES[name] = type(found)
        return found
    return kind()
