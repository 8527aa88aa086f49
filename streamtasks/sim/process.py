"""One simulated consumer process: the real member state machine plus a tiny application.

The application consumes its owned partitions at a steady rate (its position in a partition is
the committed offset it started from plus one record per ``record_interval_ms`` owned), hands
the positions to the member's ``CommitOffsets`` actions, and applies the listener calls to the
ownership ledger. A process has incarnations: a crash ends one, a restart begins the next with
a fresh machine (a static member keeps its ``group_instance_id`` across them).
"""

from __future__ import annotations

from dataclasses import dataclass

from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic import ClassicMember, MemberConfig
from streamtasks.sim.apps import SimApp
from topology.ids import TopicPartition

__all__ = ["DeferredInput", "SimProcess"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeferredInput:
    """Something that reached a paused process; handled in order when it resumes."""

    kind: str
    payload: object = None


class SimProcess:
    """A member incarnation and its application state. The world drives it."""

    def __init__(
        self,
        *,
        name: str,
        incarnation: int,
        config: MemberConfig,
        started_ms: int = 0,
        app: SimApp | None = None,
    ) -> None:
        self.name = name
        #: The application whose assignors the member runs (None: a plain consumer).
        self.app = app
        self.started_ms = started_ms
        self.incarnation = incarnation
        self.conn = f"{name}#{incarnation}"
        self.config = config
        self.member = ClassicMember(config)
        self.protocol: RebalanceProtocol = config.protocol
        self.alive = True
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
        self.last_generation = -1
        self.leaving = False
        #: When this process was last told to lead with SkipAssignment (KIP-814).
        self.skip_assignment_at: int | None = None

    @property
    def paused(self) -> bool:
        return self.paused_until is not None

    @property
    def is_static(self) -> bool:
        return self.config.group_instance_id is not None

    def __repr__(self) -> str:
        return f"SimProcess({self.conn}, alive={self.alive}, state={self.member.state.value})"
