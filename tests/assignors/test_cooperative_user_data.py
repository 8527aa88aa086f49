"""cooperative.assign() and assignors that return user data (GroupAssignment.user_data)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import pytest

from assignors import cooperative
from assignors.partition.types import GroupAssignment, GroupSubscription, MemberId, RebalanceProtocol
from streamtasks.errors import AssignorError
from tests.assignors.partition.groups import group
from tests.ids import tp
from topology.ids import TopicPartition

COOPERATIVE = RebalanceProtocol.COOPERATIVE
EAGER = RebalanceProtocol.EAGER


class _Fixed:
    """Returns the same result whatever the group."""

    name: ClassVar[str] = "fixed"
    version: ClassVar[int] = 0

    def __init__(
        self, members: Mapping[MemberId, tuple[TopicPartition, ...]], user_data: Mapping[MemberId, bytes]
    ) -> None:
        self.result = GroupAssignment(members=members, user_data=user_data)

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (EAGER, COOPERATIVE)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        return self.result


def _two_members(owned_by_a: list[TopicPartition]) -> GroupSubscription:
    return group({"a": ["t"], "b": ["t"]}, {"t": 2}, {"a": owned_by_a}, {"a": 3})


@pytest.mark.parametrize("protocol", [EAGER, COOPERATIVE])
def test_user_data_is_kept_under_both_protocols(protocol: RebalanceProtocol) -> None:
    assignor = _Fixed({"a": (tp("t", 0),), "b": (tp("t", 1),)}, {"a": b"A", "b": b"B"})
    result = cooperative.assign(assignor, _two_members([]), protocol)
    assert dict(result.user_data) == {"a": b"A", "b": b"B"}


def test_a_known_partition_a_user_data_assignor_left_out_is_revoked_not_handed_back() -> None:
    # the assignor withheld t-1 from b itself (a still owns it): a must revoke it
    assignor = _Fixed({"a": (tp("t", 0),), "b": ()}, {"a": b"A", "b": b"B"})
    result = cooperative.assign(assignor, _two_members([tp("t", 0), tp("t", 1)]), COOPERATIVE)
    assert dict(result.members) == {"a": (tp("t", 0),), "b": ()}


def test_a_partition_of_an_unknown_topic_is_still_handed_back() -> None:
    assignor = _Fixed({"a": (tp("t", 0),), "b": (tp("t", 1),)}, {"a": b"A"})
    result = cooperative.assign(assignor, _two_members([tp("t", 0), tp("gone", 0)]), COOPERATIVE)
    assert dict(result.members) == {"a": (tp("gone", 0), tp("t", 0)), "b": (tp("t", 1),)}


def test_without_user_data_a_known_partition_left_out_goes_back_to_its_owner() -> None:
    assignor = _Fixed({"a": (tp("t", 0),), "b": ()}, {})
    result = cooperative.assign(assignor, _two_members([tp("t", 0), tp("t", 1)]), COOPERATIVE)
    assert dict(result.members) == {"a": (tp("t", 0), tp("t", 1)), "b": ()}


def test_user_data_is_kept_as_is_when_adjust_still_withholds() -> None:
    # not cooperative-safe: gives b the partition a still owns; adjust withholds it
    assignor = _Fixed({"a": (), "b": (tp("t", 0), tp("t", 1))}, {"a": b"A", "b": b"runs t-0, t-1"})
    result = cooperative.assign(assignor, _two_members([tp("t", 0)]), COOPERATIVE)
    assert dict(result.members) == {"a": (), "b": (tp("t", 1),)}
    assert result.followup_needed
    assert result.user_data["b"] == b"runs t-0, t-1"


def test_user_data_for_a_stranger_is_rejected() -> None:
    assignor = _Fixed({"a": ()}, {"stranger": b"?"})
    with pytest.raises(AssignorError, match="stranger"):
        cooperative.assign(assignor, _two_members([]), COOPERATIVE)


def test_group_assignment_user_data_is_a_read_only_view() -> None:
    plain = GroupAssignment(members={"a": ()})
    assert dict(plain.user_data) == {}
    made = GroupAssignment.from_sorted({"a": ()}, followup_needed=True, user_data={"a": b"x"})
    assert dict(made.user_data) == {"a": b"x"}
    assert made == GroupAssignment(members={"a": ()}, followup_needed=True, user_data={"a": b"x"})
    with pytest.raises(TypeError):
        made.user_data["a"] = b"y"  # type: ignore[index]
