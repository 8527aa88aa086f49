"""Many :class:`~topology.ids.TopicPartition` objects at once, for the hot paths that make
100,000 of them (an assignor's output, a leader decoding every member's owned partitions)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import chain, repeat

from topology.bulk import slot_setters
from topology.ids import TopicPartition

__all__ = ["topic_partitions", "topic_partitions_of"]


_SLOTS = slot_setters(TopicPartition)
_SETTERS = None if _SLOTS is None else (_SLOTS["topic"], _SLOTS["partition"])
#: Below this many, a plain loop sets the slots faster than C-level passes that cost more to start.
_FEW = 40


def topic_partitions(topic: str, partitions: Sequence[int]) -> list[TopicPartition]:
    """``[TopicPartition(topic, p) for p in partitions]``, with the slots set directly instead
    of through the dataclass constructor (about twice as fast for many partitions)."""
    count = len(partitions)
    if _SETTERS is None:
        return list(map(TopicPartition, repeat(topic, count), partitions))
    set_topic, set_partition = _SETTERS
    made: list[TopicPartition] = list(map(object.__new__, repeat(TopicPartition, count)))
    if count < _FEW:
        for tp, partition in zip(made, partitions, strict=True):
            set_topic(tp, topic)
            set_partition(tp, partition)
    else:
        deque(map(set_topic, made, repeat(topic, count)), maxlen=0)
        deque(map(set_partition, made, partitions), maxlen=0)
    return made


def topic_partitions_of(groups: Sequence[tuple[str, Sequence[int]]]) -> list[TopicPartition]:
    """Every group's ``topic_partitions(topic, partitions)``, one after the other, made in
    one go: many small groups cost little more than one big one."""
    sizes = [len(partitions) for _, partitions in groups]
    topics = chain.from_iterable(map(repeat, [topic for topic, _ in groups], sizes))
    numbers = chain.from_iterable(partitions for _, partitions in groups)
    if _SETTERS is None:
        return list(map(TopicPartition, topics, numbers))
    set_topic, set_partition = _SETTERS
    made: list[TopicPartition] = list(map(object.__new__, repeat(TopicPartition, sum(sizes))))
    deque(map(set_topic, made, topics), maxlen=0)
    deque(map(set_partition, made, numbers), maxlen=0)
    return made
