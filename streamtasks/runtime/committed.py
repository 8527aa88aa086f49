"""Where a consumer starts its owned partitions: their committed offsets and metadata strings,
read from the group coordinator. Under ``read_committed`` a partition whose committed offset a
pending transaction still holds (UNSTABLE_OFFSET_COMMIT) stays owned but unfetched, and is
asked again every ``retry_backoff_ms`` until the transaction ended (KIP-447: the new owner of a
partition waits for the old owner's transaction to commit or abort)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Iterable, Sequence

from streamtasks.errors import StreamTasksError
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.config import ConsumerConfig
from streamtasks.runtime.connection import GroupCoordinatorClient
from streamtasks.runtime.group_member import fetch_offsets
from topology.ids import TopicPartition

__all__ = ["CommittedOffsets"]

log = logging.getLogger("streamtasks.consumer")


class CommittedOffsets:
    """The committed offsets read for a consumer's partitions (into its ``positions``), their
    metadata strings, and the partitions held by a pending transaction (see the module
    docstring). ``owned`` and ``closed`` read the consumer's state; ``ready`` hands out
    partitions whose committed offset became readable."""

    __slots__ = ("_closed", "_config", "_owned", "_positions", "_ready", "_task", "metadata", "unstable")

    def __init__(
        self,
        config: ConsumerConfig,
        positions: dict[TopicPartition, int],
        *,
        owned: Callable[[], frozenset[TopicPartition]],
        closed: Callable[[], bool],
        ready: Callable[[list[TopicPartition]], None],
    ) -> None:
        self._config = config
        self._positions = positions
        self._owned = owned
        self._closed = closed
        self._ready = ready
        #: The metadata strings of the committed offsets read for owned partitions (not empty).
        self.metadata: dict[TopicPartition, str] = {}
        #: Owned partitions whose committed offset a pending transaction still holds.
        self.unstable: set[TopicPartition] = set()
        self._task: asyncio.Task[None] | None = None

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.metadata.pop(tp, None)

    async def read(
        self, client: GroupCoordinatorClient, partitions: Sequence[TopicPartition]
    ) -> set[TopicPartition]:
        """Read the committed offsets of ``partitions`` into the positions; return those a
        pending transaction still holds (``read_committed`` asks with ``require_stable``)."""
        stable = self._config.isolation_level == "read_committed"
        fetched = await fetch_offsets(client, self._config, tuple(partitions), require_stable=stable)
        unstable: set[TopicPartition] = set()
        self.forget(partitions)
        self.metadata.update(fetched.metadata)
        for tp, offset, err in fetched.offsets:
            if KafkaErrorCode.UNSTABLE_OFFSET_COMMIT in (err, fetched.error):
                unstable.add(tp)
            elif err is KafkaErrorCode.NONE and offset >= 0:
                self._positions[tp] = offset
        return unstable

    def hold(self, client: GroupCoordinatorClient, partitions: Collection[TopicPartition]) -> None:
        """Keep ``partitions`` unfetched until their committed offsets are readable."""
        if not partitions:
            return
        self.unstable.update(partitions)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._wait(client))

    async def _wait(self, client: GroupCoordinatorClient) -> None:
        while self.unstable and not self._closed():
            await asyncio.sleep(max(self._config.retry_backoff_ms, 20) / 1000)
            owned = self._owned()
            waiting = sorted(self.unstable & owned)
            try:
                still = await self.read(client, waiting) if waiting else set()
            except StreamTasksError as exc:
                log.info("committed offsets still unavailable: %s", exc)
                continue
            owned = self._owned()
            ready = [tp for tp in waiting if tp not in still and tp in owned]
            self.unstable = still & owned
            if ready:
                log.info("committed offsets of %s are stable now", ready)
                self._ready(ready)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
