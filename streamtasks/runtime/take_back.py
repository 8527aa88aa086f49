"""A lapsed assignment taken back, as the :class:`~streamtasks.runtime.consumer.Consumer`'s fetch
side sees it.

When the member's session rule gave its partitions up (``on_partitions_lost``) and the
coordinator then vouched for the generation (KIP-848: epoch) they were lost in, the member takes
the same assignment back without a rebalance. Nobody else owned the partitions meanwhile, so
their committed offsets are this member's own, at or behind the positions it held: fetching may
resume there at once, as a Java member that never gave them up would, instead of after an
OffsetFetch — unless a listener callback ran for the loss and may have rolled back what was
handed out since the last commit (``take_back_positions``, docs/drills.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from streamtasks.membership.common.actions import AssignmentChanged, ListenerKind
from topology.ids import TopicPartition

__all__ = ["TAKEN_BACK_METRIC", "TakeBack", "listener_callback"]

log = logging.getLogger("streamtasks.consumer")

#: :meth:`Consumer.metrics`: assignments lost and given back in the generation (KIP-848: epoch)
#: they were lost in, i.e. a lapsed assignment the coordinator vouched for, taken back without
#: a rebalance (classic and KIP-848 alike; counted where the fetch side sees it).
TAKEN_BACK_METRIC = "assignments-taken-back-total"


def listener_callback(listener: Any, kind: ListenerKind) -> Callable[..., Any] | None:
    """``listener``'s callback for ``kind``, if it has one; a loss without ``on_partitions_lost``
    calls ``on_partitions_revoked`` (Kafka's default)."""
    if listener is None:
        return None
    callback = getattr(listener, kind.value, None)
    if callback is None and kind is ListenerKind.LOST:
        callback = getattr(listener, ListenerKind.REVOKED.value, None)
    return callback


class TakeBack:
    """The positions of the partitions last lost, the generation they were lost in, and the
    assignments taken back (``total``)."""

    def __init__(self) -> None:
        #: The generation (epoch) the owned partitions are held under; the one the last
        #: ``on_partitions_lost`` was decided in (a KIP-848 epoch can move on without an
        #: assignment change).
        self._owned_generation = -1
        self._lost_in = -1
        self._lost: tuple[int, dict[TopicPartition, int]] = (-1, {})
        self.total = 0

    @staticmethod
    def keeps(setting: bool | None, listener: Any) -> bool:
        """Whether a take-back resumes from the positions held at the loss: ``setting``
        (``take_back_positions``), else only when no listener callback ran for the loss."""
        return setting if setting is not None else listener_callback(listener, ListenerKind.LOST) is None

    def lost_called(self, generation: int) -> None:
        """The lost callback ran, decided in ``generation``."""
        self._lost_in = generation

    def apply(
        self, change: AssignmentChanged, positions: Mapping[TopicPartition, int], *, keep: bool
    ) -> dict[TopicPartition, int]:
        """Note what ``change`` loses (at ``positions``, before they are dropped) and return the
        positions to resume ``change.added`` from when it takes back partitions lost in the same
        generation and ``keep`` allows it."""
        if change.lost:
            lost = {tp: positions[tp] for tp in change.lost if tp in positions}
            self._lost = (max(self._lost_in, self._owned_generation), lost)
            self._lost_in = -1
        kept = self._taken_back(change)
        self._owned_generation = change.generation
        if not kept or not keep:
            return {}
        log.info("lapsed assignment taken back at generation %d: resuming %s", change.generation, kept)
        return kept

    def _taken_back(self, change: AssignmentChanged) -> dict[TopicPartition, int]:
        generation, lost = self._lost
        if not change.lost and change.added:
            self._lost = (-1, {})
        if generation < 0 or change.generation != generation:
            return {}
        kept = {tp: lost[tp] for tp in change.added if tp in lost}
        if kept:
            self.total += 1
        return kept
