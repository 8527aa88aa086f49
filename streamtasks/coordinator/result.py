"""What a write returns: the records to append (and replay), the response, timer operations,
and, for a metadata update, the new metadata image."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from streamtasks.coordinator.parked import JoinOp
from streamtasks.coordinator.records import Record
from streamtasks.coordinator.timers import TimerOp
from streamtasks.coordinator.types import MetadataImage

__all__ = ["Result"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True)
class Result(Generic[R]):
    """``records`` in the order they must be written and replayed; ``timers`` applied after
    them; ``image`` (from ``on_metadata_image``) becomes the coordinator's metadata image;
    ``joins`` park classic members' JoinGroups or answer parked ones (``parked.py``)."""

    records: tuple[Record, ...]
    response: R
    timers: tuple[TimerOp, ...] = ()
    image: MetadataImage | None = None
    joins: tuple[JoinOp, ...] = ()
