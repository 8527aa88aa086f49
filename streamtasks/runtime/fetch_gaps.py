"""The consumer's check of fetched batches against the offsets it handed out: a batch that
does not continue where a partition's last handed-out record ended is trimmed (fetched before
a seek) or, if it leaves a gap, checked with the broker before it is handed out."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord

from streamtasks.runtime.aio import AioTopicPartition, from_aio
from topology.ids import TopicPartition

__all__ = ["FetchGaps"]

log = logging.getLogger("streamtasks.consumer")


class FetchGaps:
    """The gap probes under way and the fetch counters (``metrics``: ``fetch-*-total``)."""

    __slots__ = ("probes", "stats")

    def __init__(self) -> None:
        #: Partitions whose fetcher was sent back to check a gap, and the offset it was sent to.
        self.probes: dict[TopicPartition, int] = {}
        self.stats = {"rewinds": 0, "gaps_detected": 0, "gaps_confirmed": 0, "gaps_recovered": 0}

    def checked(
        self,
        tp: TopicPartition,
        atp: AioTopicPartition,
        records: list[ConsumerRecord[Any, Any]],
        positions: Mapping[TopicPartition, int],
        fetcher: AIOKafkaConsumer | None,
    ) -> list[ConsumerRecord[Any, Any]] | None:
        """The records of a batch of ``tp`` that may be handed out, or None (the batch is
        dropped): records below the partition's position (fetched before a seek) are trimmed,
        and a batch that does not start at the position is checked (:meth:`continues`)."""
        floor = positions.get(tp)
        if floor is None:
            return records
        # Offsets rise within a batch: only a batch that starts below our position (fetched
        # before a seek) needs trimming, and that is rare.
        fresh = records if records[0].offset >= floor else [r for r in records if r.offset >= floor]
        if not fresh or not self.continues(tp, atp, floor, fresh[0].offset, fetcher):
            return None
        return fresh

    def not_handed_out(
        self,
        atp: AioTopicPartition,
        first: int,
        owned: frozenset[TopicPartition],
        positions: Mapping[TopicPartition, int],
        fetcher: AIOKafkaConsumer | None,
    ) -> None:
        """Records of ``atp`` came back but are not handed out (the partition is paused or is
        being revoked). If it is still owned, the fetcher goes back to where the records began,
        so that they are fetched again after ``resume``; a revoked partition's next owner starts
        from the committed offset."""
        tp = from_aio(atp)
        if tp not in owned or fetcher is None:
            return
        back = positions.get(tp, first)
        log.warning(
            "fetched records of %s from offset %d that cannot be handed out now (paused); "
            "the fetcher goes back to %d",
            tp,
            first,
            back,
        )
        fetcher.seek(atp, back)
        self.stats["rewinds"] += 1

    def continues(
        self,
        tp: TopicPartition,
        atp: AioTopicPartition,
        expected: int,
        first: int,
        fetcher: AIOKafkaConsumer | None,
    ) -> bool:
        """Whether a batch of ``tp`` starting at ``first`` may be handed out when ``expected`` is
        the offset after the last record handed out.

        A batch that starts above ``expected`` leaves a gap. Gaps are legitimate where the log
        has no records to give (compaction, transaction markers, retention deleted them); they
        are a bug where the fetcher moved past records nobody handed out. The consumer cannot
        tell the two apart from the batch, so it asks the broker: the fetcher goes back to
        ``expected`` and the batch is dropped. The batch fetched from ``expected`` is the log's
        own answer and is handed out whatever offset it starts at.
        """
        probe = self.probes.pop(tp, None)
        if first == expected:
            if probe == expected:
                log.error("the fetcher had skipped %s from offset %d; refetched from there", tp, expected)
                self.stats["gaps_recovered"] += 1
            return True
        if probe == expected:
            # INFO, not DEBUG: on a topic without compaction, transactions or retention deletes
            # this is the broker skipping records, and the drills' logs (INFO) must show it.
            log.info(
                "%s: the broker has no records in [%d, %d) (compacted, markers, deleted)", tp, expected, first
            )
            self.stats["gaps_confirmed"] += 1
            return True
        log.warning(
            "fetched %s from offset %d, but the next record handed out should be %d: "
            "refetching from %d to check the gap",
            tp,
            first,
            expected,
            expected,
        )
        assert fetcher is not None
        self.probes[tp] = expected
        fetcher.seek(atp, expected)
        self.stats["gaps_detected"] += 1
        return False
