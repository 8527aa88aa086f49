"""The group member of an :class:`~streamtasks.App`: a :class:`streamtasks.Consumer` whose
commits and assignments go through the callables it was given (it knows nothing of the app).

* ``positions()`` (what a revocation commits) are the *processed and flushed* input offsets,
  not the fetch positions: before the member commits (``before_commit``), ``flushed_offsets``
  flushes the producer and checkpoints under the app lock, so no batch is half-processed, and
  returns the offsets that are safe to commit; ``commit_metadata()`` the metadata strings
  committed with them (``metadata_of``: the tasks' stream times).
* a new assignment first pauses every added partition, then ``on_assignment`` (the app's
  reconcile) runs with the member's ``AssignmentChanged`` as it is: partitions lost rather than
  revoked are in ``change.lost``. The app resumes the partitions of tasks that need no restore;
  restoring tasks resume when done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from streamtasks.app.streams_group import StreamsWiring
from streamtasks.membership.classic import AssignmentChanged, ErrorReported
from streamtasks.membership.streams import EndpointsChanged, TaskOffsetsUpdated
from streamtasks.protocol.streams_group import EndpointToPartitions, TopicInfo
from streamtasks.runtime.consumer import Consumer
from topology.ids import TopicPartition

__all__ = ["AppConsumer", "FlushedOffsets", "MetadataOf", "OnAssignment"]

#: Flush what was processed, then the input offsets of ``partitions`` that may be committed.
FlushedOffsets = Callable[[tuple[TopicPartition, ...]], Awaitable[Mapping[TopicPartition, int]]]
#: The metadata strings to commit with the offsets of these partitions.
MetadataOf = Callable[[Iterable[TopicPartition]], Mapping[TopicPartition, str]]
#: Apply the member's new assignment to the tasks.
OnAssignment = Callable[[AssignmentChanged], Awaitable[None]]


class AppConsumer(Consumer):
    """See the module docstring."""

    def __init__(
        self,
        topics: tuple[str, ...],
        *,
        flushed_offsets: FlushedOffsets,
        on_assignment: OnAssignment,
        metadata_of: MetadataOf | None = None,
        streams: StreamsWiring | None = None,
        **kwargs: Any,
    ) -> None:
        # A task taken back restores to its committed offsets: fetching resumes from those.
        kwargs["take_back_positions"] = False
        super().__init__(topics, member=None if streams is None else streams.member(), **kwargs)
        self._streams = streams
        self._flushed_offsets = flushed_offsets
        self._on_assignment = on_assignment
        self._metadata_of = metadata_of
        self._committable: dict[TopicPartition, int] = {}
        self._metadata: dict[TopicPartition, str] = {}

    @property
    def protocol_name(self) -> str | None:
        """The assignor protocol the coordinator selected at the last JoinGroup (classic)."""
        return getattr(self._member, "protocol_name", None)

    def positions(self) -> Mapping[TopicPartition, int]:
        return self._committable

    def commit_metadata(self) -> Mapping[TopicPartition, str]:
        return self._metadata

    async def before_commit(self, partitions: tuple[TopicPartition, ...]) -> None:
        await super().before_commit(partitions)
        self._committable = dict(await self._flushed_offsets(partitions))
        self._metadata = {} if self._metadata_of is None else dict(self._metadata_of(self._committable))

    async def assignment_changed(self, change: AssignmentChanged) -> None:
        self.pause(change.added)
        await super().assignment_changed(change)
        await self._on_assignment(change)

    # -- a streams group (StreamsGroupHost) --------------------------------------------------

    async def start(self) -> None:
        if self._streams is not None:  # the process id is known now (the state directory)
            await self._streams.prepare()
            self._member = self._streams.member()
        await super().start()

    def streams_task_offsets(self) -> TaskOffsetsUpdated | None:
        return None if self._streams is None else self._streams.task_offsets()

    async def streams_create_topics(self, topics: tuple[TopicInfo, ...]) -> None:
        """The broker reports missing internal topics: create the App's (idempotent)."""
        if self._streams is not None:
            await self._streams.create_topics()

    def streams_endpoints(self, change: EndpointsChanged) -> None:
        """Which endpoints host which partitions now (interactive queries route by it)."""
        if self._streams is not None:
            self._streams.endpoints_changed(change)

    @property
    def streams_endpoint_partitions(self) -> tuple[EndpointToPartitions, ...]:
        """The latest endpoints-to-partitions of the streams group (empty outside one)."""
        return () if self._streams is None else self._streams.endpoints

    def streams_shutdown(self, detail: str) -> None:
        """A member asked the whole streams group to shut down: this one stops too (the next
        fetch raises ConsumerFailedError)."""
        self.error_reported(
            ErrorReported(reason=f"the streams group asks every member to shut down: {detail}", fatal=True)
        )
