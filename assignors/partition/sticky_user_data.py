"""KIP-341: the sticky assignor's userdata with a generation marker.

There is no version header; the two versions are told apart by trying the newer first::

    v0 => PreviousAssignment                    ([Topic [Partition]], Kafka's classic arrays)
    v1 => PreviousAssignment Generation         (Generation: int32)

* A v1 reader tries v1; when that read fails (the buffer ends before the generation) it falls
  back to v0 and reports no generation (``None``; the assignor treats it as -1).
* A v0 reader reads the partitions and ignores a trailing generation.
* Encoding groups partitions by topic, topics sorted and partitions ascending. (Java's
  ``StickyAssignor`` iterates a ``HashMap``, so its topic order is an accident of hashing; any
  order decodes to the same partitions.) Only the two plain layouts are ever written.

kafka-python 3's variant (read, never written). kafka-python encodes its
``StickyAssignorUserData`` with its generic schema encoder, which puts the schema version first
as an int16::

    kafka-python => Version:int16 (0 or 1) then the v<Version> layout above

It always writes version 1 (``00 01``, then KIP-341 v1). Read as plain KIP-341 those bytes fail
(the int16 and the first half of the topic count make a count of at least 65,536 topics), so a
leader that knew only the plain layouts lost the stickiness of kafka-python members.
:func:`decode_sticky_userdata` tries, in order: plain v1 and plain v0 that consume the buffer
exactly (everything Java and streamtasks write), the kafka-python variant consuming it exactly,
then Java's lenient reads (v1, then v0, trailing bytes ignored). A buffer can only fit both a
plain layout and the variant exactly by accident of garbage, never for bytes a client wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.wire import INT32_MAX, INT32_MIN, Reader, Writer
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


#: The int16 schema version kafka-python 3 writes before the layout, and the layout it announces.
_KAFKA_PYTHON_HEADERS = {b"\x00\x00": 0, b"\x00\x01": 1}


def _read(data: bytes, version: int, *, header: bool = False, exact: bool = False) -> StickyUserData:
    what = f"kafka-python sticky userdata v{version}" if header else f"sticky userdata v{version}"
    r = Reader(data, what)
    if header:
        r.int16()
    partitions: list[TopicPartition] = []
    for _ in range(r.kafka_array_length("previous_assignment", 6)):
        topic = r.kafka_string("topic")
        for _ in range(r.kafka_array_length("partitions", 4)):
            partitions.append(TopicPartition(topic, r.int32()))
    generation = r.int32() if version == 1 else None
    if exact and r.remaining:
        raise r.fail(f"{r.remaining} byte(s) after the layout")
    return StickyUserData(partitions=tuple(partitions), generation=generation)


def decode_sticky_userdata(data: bytes, max_version: int = 1) -> StickyUserData:
    """Decode as KIP-341 prescribes, v1 first, then v0 with no generation; also kafka-python
    3's variant with an int16 version header (see the module's documentation).

    ``max_version=0`` behaves as a v0-only reader (ignores a trailing generation). Raises
    :class:`DecodeError` when no layout can be read; callers that follow Java ignore the
    member's previous assignment then.
    """
    if max_version not in (0, 1):
        raise LocalProtocolError(f"sticky userdata has versions 0 and 1, not {max_version}")
    versions = (1, 0) if max_version == 1 else (0,)
    for version in versions:
        try:
            return _read(data, version, exact=True)
        except DecodeError:
            pass
    header_version = _KAFKA_PYTHON_HEADERS.get(bytes(data[:2]))
    if header_version is not None:
        try:
            ud = _read(data, header_version, header=True, exact=True)
        except DecodeError:
            pass
        else:
            return ud if max_version >= header_version else StickyUserData(partitions=ud.partitions)
    for version in versions[:-1]:
        try:
            return _read(data, version)
        except DecodeError:
            pass
    return _read(data, versions[-1])
