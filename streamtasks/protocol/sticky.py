"""KIP-341: the sticky assignor's userdata with a generation marker.

There is no version header; the two versions are told apart by trying the newer first::

    v0 => PreviousAssignment                    ([Topic [Partition]], Kafka's classic arrays)
    v1 => PreviousAssignment Generation         (Generation: int32)

* A v1 reader tries v1; when that read fails (the buffer ends before the generation) it falls
  back to v0 and reports no generation (``None``; the assignor treats it as -1).
* A v0 reader reads the partitions and ignores a trailing generation.
* Encoding groups partitions by topic, topics sorted and partitions ascending. (Java's
  ``StickyAssignor`` iterates a ``HashMap``, so its topic order is an accident of hashing; any
  order decodes to the same partitions.)
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol._buf import INT32_MAX, INT32_MIN, Reader, Writer
from topology.ids import TopicPartition

__all__ = [
    "DEFAULT_GENERATION",
    "StickyUserData",
    "decode_sticky_userdata",
    "encode_sticky_userdata",
]

#: What a missing generation marker stands for (Java's ``DEFAULT_GENERATION``).
DEFAULT_GENERATION = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class StickyUserData:
    """A member's previous assignment and, from v1, the generation it belongs to."""

    partitions: tuple[TopicPartition, ...]
    generation: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", tuple(self.partitions))
        if self.generation is not None and not INT32_MIN <= self.generation <= INT32_MAX:
            raise LocalProtocolError(f"generation {self.generation} does not fit in an int32")
        for tp in self.partitions:
            if not INT32_MIN <= tp.partition <= INT32_MAX:
                raise LocalProtocolError(f"partition {tp} does not fit in an int32")

    @property
    def effective_generation(self) -> int:
        """The generation, or :data:`DEFAULT_GENERATION` for v0 userdata."""
        return DEFAULT_GENERATION if self.generation is None else self.generation


def encode_sticky_userdata(ud: StickyUserData, version: int = 1) -> bytes:
    """v1 (default) appends the generation (-1 when ``None``); v0 writes only the partitions."""
    if version not in (0, 1):
        raise LocalProtocolError(f"sticky userdata has versions 0 and 1, not {version}")
    groups: list[tuple[str, list[int]]] = []
    for tp in sorted(ud.partitions):
        if not groups or groups[-1][0] != tp.topic:
            groups.append((tp.topic, []))
        groups[-1][1].append(tp.partition)
    w = Writer()
    w.kafka_array_length(len(groups), "previous_assignment")
    for topic, parts in groups:
        w.kafka_nullable_string(topic, "topic")
        w.kafka_array_length(len(parts), "partitions")
        for p in parts:
            w.int32(p, "partition")
    if version == 1:
        w.int32(ud.effective_generation, "generation")
    return w.getvalue()


def _read(data: bytes, version: int) -> StickyUserData:
    r = Reader(data, f"sticky userdata v{version}")
    partitions: list[TopicPartition] = []
    for _ in range(r.kafka_array_length("previous_assignment", 6)):
        topic = r.kafka_string("topic")
        for _ in range(r.kafka_array_length("partitions", 4)):
            partitions.append(TopicPartition(topic, r.int32()))
    generation = r.int32() if version == 1 else None
    return StickyUserData(partitions=tuple(partitions), generation=generation)


def decode_sticky_userdata(data: bytes, max_version: int = 1) -> StickyUserData:
    """Decode as KIP-341 prescribes: v1 first, then v0 with no generation.

    ``max_version=0`` behaves as a v0-only reader (ignores a trailing generation). Raises
    :class:`DecodeError` when neither version can be read; callers that follow Java ignore
    the member's previous assignment then.
    """
    if max_version not in (0, 1):
        raise LocalProtocolError(f"sticky userdata has versions 0 and 1, not {max_version}")
    if max_version == 1:
        try:
            return _read(data, 1)
        except DecodeError:
            pass
    return _read(data, 0)
