"""streamtasks' decoded messages in the JSON form of Kafka's generated ``*DataJsonConverter``
(field names in camelCase, ``error`` as ``errorCode``), for the Java codec check."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

__all__ = ["camel", "to_kafka_json"]

_RENAMED = {"error": "errorCode"}


def camel(name: str) -> str:
    """``task_offset_interval_ms`` -> ``taskOffsetIntervalMs``, as Kafka names JSON fields."""
    if name in _RENAMED:
        return _RENAMED[name]
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def to_kafka_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {camel(f.name): to_kafka_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_kafka_json(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, enum.IntEnum):
        return int(value)
    return value
