"""The structs the streams-group messages share, as bytes (flexible encoding, every struct with
its tagged-field section), and the array helpers the codecs build on. Readers raise
:class:`~streamtasks.errors.DecodeError`, writers :class:`~streamtasks.errors.LocalProtocolError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TypeVar

from streamtasks.errors import LocalProtocolError
from streamtasks.protocol import _flex as F
from streamtasks.protocol._buf import Reader, Writer
from streamtasks.protocol.streams_group import Endpoint, KeyValue, TaskIds, TaskOffset, TopicInfo

__all__ = [
    "read_array",
    "read_endpoint",
    "read_int16s",
    "read_key_values",
    "read_nullable_array",
    "read_strings",
    "read_struct_end",
    "read_task_ids",
    "read_task_offsets",
    "read_topic_infos",
    "write_array",
    "write_endpoint",
    "write_int16s",
    "write_key_values",
    "write_nullable_array",
    "write_strings",
    "write_struct_end",
    "write_task_ids",
    "write_task_offsets",
    "write_topic_infos",
]

T = TypeVar("T")
_U16 = struct.Struct(">H")


def write_struct_end(w: Writer) -> None:
    """The (empty) tagged-field section that ends every struct: Kafka 4.4 defines no tags here."""
    F.write_tagged_fields(w, ())


def read_struct_end(r: Reader, what: str) -> None:
    """A struct's tagged-field section; unknown tags are skipped, as Kafka skips them."""
    F.read_tagged_fields(r, what, {})


# -- arrays ---------------------------------------------------------------------------------------


def write_array(w: Writer, items: Sequence[T], field: str, write_one: Callable[[Writer, T], None]) -> None:
    F.write_compact_array_count(w, len(items), field)
    for item in items:
        write_one(w, item)


def write_nullable_array(
    w: Writer, items: Sequence[T] | None, field: str, write_one: Callable[[Writer, T], None]
) -> None:
    if items is None:
        F.write_compact_nullable_array_count(w, None, field)
    else:
        write_array(w, items, field, write_one)


def read_array(r: Reader, field: str, read_one: Callable[[Reader], T], min_size: int = 1) -> tuple[T, ...]:
    count = F.read_compact_array_count(r, field, min_size)
    return tuple(read_one(r) for _ in range(count))


def read_nullable_array(
    r: Reader, field: str, read_one: Callable[[Reader], T], min_size: int = 1
) -> tuple[T, ...] | None:
    count = F.read_compact_nullable_array_count(r, field, min_size)
    if count is None:
        return None
    return tuple(read_one(r) for _ in range(count))


def write_strings(w: Writer, items: Sequence[str], field: str) -> None:
    write_array(w, items, field, lambda x, s: F.write_compact_string(x, s, field))


def read_strings(r: Reader, field: str) -> tuple[str, ...]:
    return read_array(r, field, lambda x: F.read_compact_string(x, field))


def write_int16s(w: Writer, items: Sequence[int], field: str) -> None:
    write_array(w, items, field, lambda x, v: x.int16(v, field))


def read_int16s(r: Reader, field: str) -> tuple[int, ...]:
    return read_array(r, field, lambda x: x.int16(), 2)


# -- structs --------------------------------------------------------------------------------------


def _write_key_value(w: Writer, kv: KeyValue) -> None:
    F.write_compact_string(w, kv.key, "KeyValue.Key")
    F.write_compact_string(w, kv.value, "KeyValue.Value")
    write_struct_end(w)


def _read_key_value(r: Reader) -> KeyValue:
    key = F.read_compact_string(r, "KeyValue.Key")
    value = F.read_compact_string(r, "KeyValue.Value")
    read_struct_end(r, "KeyValue")
    return KeyValue(key=key, value=value)


def write_key_values(w: Writer, items: Sequence[KeyValue] | None, field: str) -> None:
    write_nullable_array(w, items, field, _write_key_value)


def read_key_values(r: Reader, field: str, *, nullable: bool = False) -> tuple[KeyValue, ...] | None:
    if nullable:
        return read_nullable_array(r, field, _read_key_value, 3)
    return read_array(r, field, _read_key_value, 3)


def _write_topic_info(w: Writer, t: TopicInfo) -> None:
    F.write_compact_string(w, t.name, "TopicInfo.Name")
    w.int32(t.partitions, "TopicInfo.Partitions")
    w.int16(t.replication_factor, "TopicInfo.ReplicationFactor")
    write_key_values(w, t.topic_configs, "TopicInfo.TopicConfigs")
    write_struct_end(w)


def _read_topic_info(r: Reader) -> TopicInfo:
    name = F.read_compact_string(r, "TopicInfo.Name")
    partitions, replication = r.int32(), r.int16()
    configs = read_key_values(r, "TopicInfo.TopicConfigs") or ()
    read_struct_end(r, "TopicInfo")
    return TopicInfo(name=name, partitions=partitions, replication_factor=replication, topic_configs=configs)


def write_topic_infos(w: Writer, items: Sequence[TopicInfo], field: str) -> None:
    write_array(w, items, field, _write_topic_info)


def read_topic_infos(r: Reader, field: str) -> tuple[TopicInfo, ...]:
    return read_array(r, field, _read_topic_info, 9)


def write_endpoint(w: Writer, e: Endpoint) -> None:
    F.write_compact_string(w, e.host, "Endpoint.Host")
    if not 0 <= e.port <= 0xFFFF:
        raise LocalProtocolError(f"Endpoint.Port = {e.port} does not fit in [0, 65535]")
    w.raw(_U16.pack(e.port))
    write_struct_end(w)


def read_endpoint(r: Reader) -> Endpoint:
    host = F.read_compact_string(r, "Endpoint.Host")
    port = r.int16() & 0xFFFF
    read_struct_end(r, "Endpoint")
    return Endpoint(host=host, port=port)


def _write_one_task_ids(w: Writer, t: TaskIds) -> None:
    F.write_compact_string(w, t.subtopology_id, "TaskIds.SubtopologyId")
    F.write_compact_int32s(w, t.partitions, "TaskIds.Partitions")
    write_struct_end(w)


def _read_one_task_ids(r: Reader) -> TaskIds:
    subtopology = F.read_compact_string(r, "TaskIds.SubtopologyId")
    partitions = F.read_compact_int32s(r, "TaskIds.Partitions")
    read_struct_end(r, "TaskIds")
    return TaskIds(subtopology_id=subtopology, partitions=partitions)


def write_task_ids(w: Writer, items: Sequence[TaskIds] | None, field: str) -> None:
    write_nullable_array(w, items, field, _write_one_task_ids)


def read_task_ids(r: Reader, field: str, *, nullable: bool = False) -> tuple[TaskIds, ...] | None:
    if nullable:
        return read_nullable_array(r, field, _read_one_task_ids, 3)
    return read_array(r, field, _read_one_task_ids, 3)


def _write_task_offset(w: Writer, t: TaskOffset) -> None:
    F.write_compact_string(w, t.subtopology_id, "TaskOffset.SubtopologyId")
    w.int32(t.partition, "TaskOffset.Partition")
    w.int64(t.offset, "TaskOffset.Offset")
    write_struct_end(w)


def _read_task_offset(r: Reader) -> TaskOffset:
    subtopology = F.read_compact_string(r, "TaskOffset.SubtopologyId")
    partition, offset = r.int32(), r.int64()
    read_struct_end(r, "TaskOffset")
    return TaskOffset(subtopology_id=subtopology, partition=partition, offset=offset)


def write_task_offsets(w: Writer, items: Sequence[TaskOffset] | None, field: str) -> None:
    write_nullable_array(w, items, field, _write_task_offset)


def read_task_offsets(r: Reader, field: str, *, nullable: bool = False) -> tuple[TaskOffset, ...] | None:
    if nullable:
        return read_nullable_array(r, field, _read_task_offset, 14)
    return read_array(r, field, _read_task_offset, 14)
