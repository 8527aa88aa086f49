"""The KIP-848 member's read-only view: :class:`ConsumerMemberView`, what a driver may read.

:class:`~streamtasks.membership.consumer.machine.ConsumerMember` inherits it; every attribute
reads the machine's state (it declares the slots the descriptors name) and none assigns it.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamtasks.membership.common import ReadOnly
from streamtasks.membership.common.states import MemberState as S
from streamtasks.membership.consumer.config import ConsumerMemberConfig
from streamtasks.membership.consumer.records import Subscribed
from topology.ids import TopicPartition

__all__ = ["ConsumerMemberView"]


class ConsumerMemberView:
    """What the member shows its driver (read-only)."""

    __slots__ = ()

    _config: ConsumerMemberConfig
    _sub: Subscribed

    state = ReadOnly[S]("_k.state")
    member_id = ReadOnly[str]("_config.member_id")
    member_epoch = ReadOnly[int]("_membership.epoch", "The epoch the coordinator last gave it (0: none).")
    owned_partitions = ReadOnly[frozenset[TopicPartition]]("_held.record.owned", "What it owns now.")
    owned_epoch = ReadOnly[int]("_held.record.owned_generation", "The epoch of what it owns.")
    assignment_user_data = ReadOnly[bytes]("_held.record.user_data", "The assignor's metadata (b'': none).")
    subscription = ReadOnly[tuple[str, ...]]("_sub.topics", "Its topics, sent with the next full heartbeat.")
    coordinator_known = ReadOnly[bool]("_link.known", "A lookup found it, not lost since.")
    computing_assignment = ReadOnly[bool]("_job.computing", "Prepare/InstallAssignment in flight.")
    assignments_installed = ReadOnly[int]("_job.installed", "Client-side assignments installed.")
    lapsed_epoch = ReadOnly[int]("_lapse.epoch", "The epoch a lapsed member asks under (0: none; .lapse).")
    lapsed_taken_back = ReadOnly[int](
        "_lapse.taken_back", "Lapsed epochs a coordinator vouched for: the member went on, no rejoin."
    )

    @property
    def config(self) -> ConsumerMemberConfig:  # a property: the runtime's LoopMember protocol reads it
        return self._config

    @property
    def reasons(self) -> Mapping[str, int]:
        """The ``Reason`` sent for each client-side assignor."""
        return dict(self._sub.reasons)
