"""The rebalance listener and the rule for running it (KIP-429 "Rebalance Callback Error Handling").

The member never calls user code: it emits ``InvokeListener`` actions, already in KIP-429's
order, and has applied the assignment change before returning them. A driver runs an action
list with :func:`execute`, which

* runs every action in order, including every listener callback even after one raised,
* re-raises the *first* exception a callback raised once the whole list has run,
* never undoes anything: the assignment change stands (the member already applied it).

The driver may report each callback back with ``ListenerCompleted`` to feed the
``partitions-*-latency`` metrics; the member does not wait for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar, runtime_checkable

from streamtasks.membership.common.actions import InvokeListener, ListenerKind
from topology.ids import TopicPartition

__all__ = ["RebalanceListener", "call_listener", "execute"]

ActionT = TypeVar("ActionT")


@runtime_checkable
class RebalanceListener(Protocol):
    """Kafka's ``ConsumerRebalanceListener`` with KIP-429's ``on_partitions_lost``."""

    def on_partitions_revoked(self, partitions: tuple[TopicPartition, ...]) -> None: ...

    def on_partitions_assigned(self, partitions: tuple[TopicPartition, ...]) -> None: ...

    def on_partitions_lost(self, partitions: tuple[TopicPartition, ...]) -> None: ...


def call_listener(listener: RebalanceListener, action: InvokeListener) -> None:
    """Run the one callback ``action`` names."""
    if action.kind is ListenerKind.REVOKED:
        listener.on_partitions_revoked(action.partitions)
    elif action.kind is ListenerKind.ASSIGNED:
        listener.on_partitions_assigned(action.partitions)
    else:
        listener.on_partitions_lost(action.partitions)


def execute(
    actions: Iterable[ActionT],
    listener: RebalanceListener,
    other: Callable[[ActionT], None],
    on_listener_done: Callable[[InvokeListener, BaseException | None], None] | None = None,
) -> None:
    """Run ``actions`` in order: listener calls on ``listener``, everything else through
    ``other``. All callbacks run; the first exception a callback raised is re-raised at the end.
    ``on_listener_done(action, error)`` is told about each callback (e.g. to report
    ``ListenerCompleted``). Exceptions from ``other`` propagate at once: they are the driver's.
    """
    first: Exception | None = None
    for action in actions:
        if isinstance(action, InvokeListener):
            error: Exception | None = None
            try:
                call_listener(listener, action)
            except Exception as exc:
                error = exc
                if first is None:
                    first = exc
            if on_listener_done is not None:
                on_listener_done(action, error)
        else:
            other(action)
    if first is not None:
        raise first
