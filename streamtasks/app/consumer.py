"""The group member of an :class:`~streamtasks.App`: a :class:`streamtasks.Consumer` whose
commits, revocations and assignments go through the app's tasks.

* ``positions()`` (what a revocation commits) are the *processed and flushed* input offsets,
  not the fetch positions: the app flushes its producer and checkpoints before the member
  commits (``before_commit``), under the app lock, so no batch is half-processed.
* a new assignment first pauses every added partition, then the app reconciles its tasks and
  resumes the partitions of tasks that need no restore; restoring tasks resume when done.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streamtasks.membership.classic import AssignmentChanged, InvokeListener, ListenerKind
from streamtasks.runtime.consumer import Consumer
from topology.ids import TopicPartition

if TYPE_CHECKING:
    from streamtasks.app.app import App

__all__ = ["AppConsumer"]


class AppConsumer(Consumer):
    """See the module docstring."""

    def __init__(self, app: App, topics: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(topics, **kwargs)
        self._app = app
        self._committable: dict[TopicPartition, int] = {}

    @property
    def protocol_name(self) -> str | None:
        """The assignor protocol the coordinator selected at the last JoinGroup (classic)."""
        return getattr(self._member, "protocol_name", None)

    def positions(self) -> Mapping[TopicPartition, int]:
        return self._committable

    async def before_commit(self, partitions: tuple[TopicPartition, ...]) -> None:
        await super().before_commit(partitions)
        app = self._app
        async with app.lock:
            await app.flush()
            self._committable = app.tasks.committable(partitions)

    async def invoke_listener(self, call: InvokeListener) -> None:
        if call.kind is ListenerKind.LOST:  # comes before the AssignmentChanged that drops them
            self._app.tasks.lost.update(call.partitions)
        await super().invoke_listener(call)

    async def assignment_changed(self, change: AssignmentChanged) -> None:
        self.pause(change.added)
        await super().assignment_changed(change)
        await self._app.on_assignment(change)
