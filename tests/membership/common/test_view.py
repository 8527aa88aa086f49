"""A member's read-only view: one line a property, reading a field of one of its records."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from streamtasks.membership.common import ReadOnly


@dataclass(frozen=True, slots=True)
class Record:
    epoch: int


class Member:
    __slots__ = ("_record",)

    epoch = ReadOnly[int]("_record.epoch", "The epoch.")
    record = ReadOnly[Record]("_record")

    def __init__(self) -> None:
        self._record = Record(3)


def test_a_read_only_property_reads_the_record_and_cannot_be_assigned() -> None:
    member = Member()
    assert (member.epoch, member.record) == (3, Record(3))
    member._record = Record(4)  # the owner assigns its record...
    assert member.epoch == 4  # ...and the view follows it
    with pytest.raises(AttributeError):
        member.epoch = 5  # type: ignore[misc]
    assert Member.epoch.__doc__ == "The epoch."
    assert Member.record.__doc__ == "``_record``"
