"""The one conversion between streamtasks' :class:`~topology.ids.TopicPartition` and aiokafka's.

aiokafka's ``TopicPartition`` is a named tuple of its own; the runtime, the app and the drills
cross that boundary only through :func:`to_aio` and :func:`from_aio`.
"""

from __future__ import annotations

from aiokafka.structs import TopicPartition as AioTopicPartition

from topology.ids import TopicPartition

__all__ = ["AioTopicPartition", "from_aio", "to_aio"]


def to_aio(tp: TopicPartition) -> AioTopicPartition:
    """``tp`` as aiokafka names it."""
    return AioTopicPartition(tp.topic, tp.partition)


def from_aio(atp: AioTopicPartition) -> TopicPartition:
    """aiokafka's ``atp`` as streamtasks names it."""
    return TopicPartition(atp.topic, atp.partition)
