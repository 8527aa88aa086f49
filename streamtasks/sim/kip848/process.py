"""One simulated KIP-848 consumer process: the real :class:`ConsumerMember` and its application
state (what it consumes, what it committed), as the classic simulator's ``SimProcess``."""

from __future__ import annotations

from streamtasks.membership.consumer import ConsumerMember, ConsumerMemberConfig
from streamtasks.sim.process import DeferredInput
from topology.ids import TopicPartition

__all__ = ["ConsumerProcess"]


class ConsumerProcess:
    """A member incarnation; the world drives it."""

    def __init__(self, *, name: str, incarnation: int, config: ConsumerMemberConfig, now_ms: int) -> None:
        self.name = name
        self.incarnation = incarnation
        self.conn = f"{name}#{incarnation}"
        self.config = config
        self.member = ConsumerMember(config, now_ms)
        self.alive = True
        self.leaving = False
        self.paused_until: int | None = None
        self.deferred: list[DeferredInput] = []
        self.wake_token: int | None = None
        self.wake_at: int | None = None
        self.same_ms_wakes = 0
        self.last_wake_ms = -1
        #: The highest member epoch seen since the member last (re)joined at epoch 0.
        self.max_epoch = 0
        #: OffsetCommit requests in flight: request id → offsets sent; offsets accepted.
        self.pending_commits: dict[int, dict[TopicPartition, int]] = {}
        self.committed: dict[TopicPartition, int] = {}

    @property
    def paused(self) -> bool:
        return self.paused_until is not None

    @property
    def is_static(self) -> bool:
        return self.config.group_instance_id is not None

    def __repr__(self) -> str:
        return f"ConsumerProcess({self.conn}, alive={self.alive}, state={self.member.state.value})"
