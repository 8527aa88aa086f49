"""Client-side assignment (seed KIP-848): assignor selection, ShouldComputeAssignment,
PrepareAssignment / InstallAssignment and their errors, validation against the prepared epoch,
a stale result installed and asked for again, the deadline, metadata versions per member."""

from __future__ import annotations

from typing import Any

import pytest

from streamtasks.coordinator import INVALID_ASSIGNMENT, GroupCoordinator, GroupState, TimerKey, TimerKind
from streamtasks.coordinator.selection import choose_member, select_client_assignor
from streamtasks.protocol.assignment_rpc import ConsumerGroupPrepareAssignmentRequest
from streamtasks.protocol.consumer_group import ClientAssignor
from streamtasks.protocol.errors import KafkaErrorCode
from tests.coordinator.support import GROUP, Harness, assert_exclusive, topic_id, tps


def streams(minimum: int = 1, maximum: int = 3, version: int = 2, metadata: bytes = b"md") -> ClientAssignor:
    return ClientAssignor(
        name="streams",
        minimum_version=minimum,
        maximum_version=maximum,
        metadata_version=version,
        metadata_bytes=metadata,
    )


def client_group(*members: str, partitions: int = 4) -> Harness:
    h = Harness({"foo": partitions})
    for member_id in members:
        h.join(member_id, client_assignors=(streams(metadata=member_id.encode()),))
    return h


def test_common_client_assignor_asks_a_member() -> None:
    h = client_group("A")
    assert h.group.state is GroupState.ASSIGNING
    assert (h.group.group_epoch, h.group.assignment_epoch) == (1, 0)
    assert h.members["A"].should_compute
    assert h.members["A"].epoch == 0
    assert h.coordinator.timer_deadline(TimerKey(TimerKind.ASSIGNMENT, GROUP)) == 30_000

    prepared = h.prepare("A")
    assert (prepared.error, prepared.group_epoch, prepared.assignor_name) == (
        KafkaErrorCode.NONE,
        1,
        "streams",
    )
    (member,) = prepared.members
    assert (member.member_id, member.assignor.metadata_bytes, member.assignor.maximum_version) == (
        "A",
        b"A",
        3,
    )
    assert [(t.topic_name, t.num_partitions) for t in prepared.topics] == [("foo", 4)]

    installed = h.install("A", 1, {"A": tps(foo=[0, 1, 2, 3])}, versions={"A": 3}, metadata={"A": b"for-A"})
    assert installed.error is KafkaErrorCode.NONE
    assert h.group.assignment_epoch == 1
    assert h.group.client_request is None
    assert h.coordinator.timer_deadline(TimerKey(TimerKind.ASSIGNMENT, GROUP)) is None
    response = h.heartbeat("A")
    assert (response.member_epoch, response.should_compute_assignment) == (1, False)
    assert (response.assignment.metadata_version, response.assignment.metadata_bytes) == (3, b"for-A")
    assert h.group.state is GroupState.STABLE


@pytest.mark.parametrize(
    ("lists", "expected"),
    [
        ([("x", "y"), ("y", "x"), ("y",)], "y"),
        ([("x", "y"), ("x", "y"), ("y", "x")], "x"),
        ([("x", "y"), ("y", "x")], "x"),  # a tie: by name
        ([("x",), ("y",)], None),
        ([("x",), ()], None),
    ],
)
def test_client_assignor_selection(lists: list[tuple[str, ...]], expected: str | None) -> None:
    from streamtasks.coordinator import MemberMetadataRecord

    members = [
        MemberMetadataRecord(
            group_id=GROUP,
            member_id=str(i),
            client_assignors=tuple(
                ClientAssignor(name=n, minimum_version=0, maximum_version=0) for n in names
            ),
        )
        for i, names in enumerate(lists)
    ]
    assert select_client_assignor(members) == expected


def test_choose_member_is_sticky_then_rotates() -> None:
    assert choose_member(["b", "a", "c"]) == "a"
    assert choose_member(["a", "b", "c"], previous="b") == "b"
    assert choose_member(["a", "b", "c"], previous="b", skip_previous=True) == "c"
    assert choose_member(["a", "b", "c"], previous="c", skip_previous=True) == "a"
    assert choose_member(["a"], previous="a", skip_previous=True) == "a"
    assert choose_member([], previous="a") is None


def test_member_without_client_assignors_turns_the_group_server_side() -> None:
    h = client_group("A")
    h.join("B")
    assert h.group.client_request is None
    assert h.group.assignor_name == "uniform"
    assert h.group.assignment_epoch == h.group.group_epoch == 2
    assert h.prepare("A").error is KafkaErrorCode.UNKNOWN_MEMBER_ID


def test_prepare_errors() -> None:
    h = client_group("A", "B")
    c = h.coordinator

    def prepare(**changes: Any) -> KafkaErrorCode:
        fields: dict[str, Any] = {"group_id": GROUP, "member_id": "A", "member_epoch": 0}
        fields.update(changes)
        return c.prepare_assignment(ConsumerGroupPrepareAssignmentRequest(**fields), 0).response.error

    assert prepare(member_epoch=-1) is KafkaErrorCode.INVALID_REQUEST
    assert prepare(group_id="") is KafkaErrorCode.INVALID_REQUEST
    assert prepare(group_id="nope") is KafkaErrorCode.GROUP_ID_NOT_FOUND
    assert prepare(member_id="Z") is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert prepare(member_epoch=7) is KafkaErrorCode.STALE_MEMBER_EPOCH
    assert prepare(member_id="B") is KafkaErrorCode.UNKNOWN_MEMBER_ID  # not the chosen member
    assert prepare() is KafkaErrorCode.NONE


@pytest.mark.parametrize(
    ("assignment", "versions", "why"),
    [
        ({"A": tps(foo=[0, 1]), "Z": tps(foo=[2, 3])}, {}, "was not in the group"),
        ({"A": tps(foo=[0, 1]), "B": tps(foo=[2])}, {}, "not assigned"),
        ({"A": tps(foo=[0, 1, 2]), "B": tps(foo=[2, 3])}, {}, "more than once"),
        ({"A": tps(foo=[0, 1, 2, 3, 4])}, {}, "no partition 4"),
        ({"A": tps(foo=[0, 1, 2, 3], bar=[0])}, {}, "not a subscribed topic"),
        ({"A": tps(foo=[0, 1]), "B": tps(foo=[2, 3])}, {"B": 4}, "reads metadata versions 1-3"),
    ],
)
def test_invalid_install_is_refused(assignment: dict[str, Any], versions: dict[str, int], why: str) -> None:
    h = client_group("A", "B")
    prepared = h.prepare("A")
    before = h.coordinator.snapshot()
    full = {"A": 1, "B": 1} | versions
    response = h.install("A", prepared.group_epoch, assignment, versions=full)
    assert response.error is INVALID_ASSIGNMENT is KafkaErrorCode.INVALID_REQUEST
    assert response.error_message.startswith("INVALID_ASSIGNMENT:")
    assert why in response.error_message
    assert h.coordinator.snapshot() == before


def test_install_without_prepare_or_by_another_member_is_refused() -> None:
    h = client_group("A", "B")
    assert h.install("A", 2, {"A": tps(foo=[0, 1, 2, 3])}, versions={"A": 1}).error is INVALID_ASSIGNMENT
    h.prepare("A")
    assert h.install("B", 2, {"A": tps(foo=[0, 1, 2, 3])}).error is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert h.install("A", 1, {"A": tps(foo=[0, 1, 2, 3])}, versions={"A": 1}).error is INVALID_ASSIGNMENT


def test_stale_install_is_installed_and_asked_for_again() -> None:
    h = client_group("A")
    prepared = h.prepare("A")
    h.join("B", client_assignors=(streams(),))  # the group moves on to epoch 2
    assert h.group.group_epoch == 2
    assert h.group.client_request.member_id == "A"
    response = h.install("A", prepared.group_epoch, {"A": tps(foo=[0, 1, 2, 3])}, versions={"A": 1})
    assert response.error is KafkaErrorCode.NONE
    assert h.group.assignment_epoch == 1
    assert h.target("B") == tps()
    assert (h.group.client_request.member_id, h.group.client_request.group_epoch) == ("A", 2)
    assert h.heartbeat("A").should_compute_assignment
    again = h.prepare("A")
    assert [m.member_id for m in again.members] == ["A", "B"]
    assert next(m.topic_partitions for m in again.members) == tps(foo=[0, 1, 2, 3]).to_wire()
    h.install("A", again.group_epoch, {"A": tps(foo=[0, 1]), "B": tps(foo=[2, 3])}, versions={"A": 1, "B": 1})
    h.settle()
    assert (h.members["A"].owned, h.members["B"].owned) == (tps(foo=[0, 1]), tps(foo=[2, 3]))
    assert h.group.state is GroupState.STABLE
    assert_exclusive(h.coordinator)


def test_deadline_asks_another_member_without_fencing() -> None:
    h = client_group("A", "B")
    assert h.group.client_request.member_id == "A"
    h.heartbeat("B")
    h.now += 29_999
    h.heartbeat("A")
    h.heartbeat("B")
    h.advance(1)
    assert h.group.client_request.member_id == "B"
    assert h.group.member("A") is not None
    assert not h.heartbeat("A").should_compute_assignment
    assert h.heartbeat("B").should_compute_assignment
    assert h.prepare("A").error is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert h.prepare("B").error is KafkaErrorCode.NONE


def test_chosen_member_leaving_hands_the_request_over() -> None:
    h = client_group("A", "B")
    h.prepare("A")
    h.heartbeat("A", member_epoch=-1)
    # nobody is asked until a member heartbeats: the first to do so computes
    assert h.group.client_request is None
    assert h.group.prepared is None
    assert h.heartbeat("B").should_compute_assignment
    assert h.group.client_request.member_id == "B"


def stable_group(*members: str) -> Harness:
    """A client-side group in which A computed and installed foo 0-1 for A, 2-3 for B."""
    h = client_group(*members)
    installed = h.install(
        "A",
        h.prepare("A").group_epoch,
        {"A": tps(foo=[0, 1]), "B": tps(foo=[2, 3])},
        versions={"A": 1, "B": 1},
    )
    assert installed.error is KafkaErrorCode.NONE
    h.settle()
    return h


def test_a_leave_asks_the_first_member_to_heartbeat_next() -> None:
    """Not the first member in id order: the one that can hear of it first (a member chosen at
    the leave would learn only at its own next heartbeat)."""
    h = stable_group("A", "B", "C", "D")
    assert h.group.state is GroupState.STABLE
    h.heartbeat("B", member_epoch=-1)
    assert h.group.group_epoch > h.group.assignment_epoch
    assert h.group.client_request is None
    assert h.coordinator.timer_deadline(TimerKey(TimerKind.ASSIGNMENT, GROUP)) is None
    assert h.heartbeat("D").should_compute_assignment
    assert not h.heartbeat("A").should_compute_assignment
    assert h.prepare("A").error is KafkaErrorCode.UNKNOWN_MEMBER_ID
    prepared = h.prepare("D")
    assert [m.member_id for m in prepared.members] == ["A", "C", "D"]
    installed = h.install(
        "D",
        prepared.group_epoch,
        {"A": tps(foo=[0, 1]), "C": tps(foo=[2]), "D": tps(foo=[3])},
        versions={"A": 1, "C": 1, "D": 1},
    )
    assert installed.error is KafkaErrorCode.NONE
    h.settle()
    assert (h.members["C"].owned, h.members["D"].owned) == (tps(foo=[2]), tps(foo=[3]))
    assert_exclusive(h.coordinator)


def test_a_joining_member_whose_heartbeat_bumps_is_asked() -> None:
    h = stable_group("A", "B")
    h.join("C", client_assignors=(streams(metadata=b"C"),))
    assert h.members["C"].should_compute
    assert h.group.client_request.member_id == "C"


def test_metadata_versions_and_error_per_member() -> None:
    h = Harness({"foo": 2})
    h.join("A", client_assignors=(streams(1, 3, 3),))
    h.join("B", client_assignors=(streams(0, 1, 1),))
    prepared = h.prepare("A")
    assert {
        m.member_id: (m.assignor.minimum_version, m.assignor.maximum_version) for m in prepared.members
    } == {
        "A": (1, 3),
        "B": (0, 1),
    }
    split = {"A": tps(foo=[0]), "B": tps(foo=[1])}
    assert h.install("A", 2, split, versions={"A": 3, "B": 2}).error is INVALID_ASSIGNMENT
    ok = h.install("A", 2, split, versions={"A": 3, "B": 1}, metadata={"A": b"a3", "B": b"b1"}, error=3)
    assert ok.error is KafkaErrorCode.NONE
    response = h.heartbeat("B")
    assignment = response.assignment
    assert (assignment.metadata_version, assignment.metadata_bytes, assignment.error) == (1, b"b1", 3)


def test_reason_change_asks_for_a_new_assignment() -> None:
    h = client_group("A")
    h.install("A", h.prepare("A").group_epoch, {"A": tps(foo=[0, 1, 2, 3])}, versions={"A": 1})
    h.heartbeat("A")
    epoch = h.group.group_epoch
    response = h.heartbeat("A", client_assignors=(ClientAssignor(**{**_fields(streams()), "reason": 1}),))
    assert h.group.group_epoch == epoch + 1
    assert response.should_compute_assignment


def _fields(a: ClientAssignor) -> dict[str, Any]:
    return {f: getattr(a, f) for f in ClientAssignor.__dataclass_fields__}


def test_install_after_fail_over_is_validated_against_the_replayed_prepare() -> None:
    h = client_group("A", "B")
    prepared = h.prepare("A")
    fresh = GroupCoordinator(h.coordinator.config, image=h.coordinator.image)
    fresh.apply(fresh.load(h.log, h.now))
    assert fresh.snapshot() == h.coordinator.snapshot()
    h.coordinator = fresh
    response = h.install(
        "A", prepared.group_epoch, {"A": tps(foo=[0, 1]), "B": tps(foo=[2, 3])}, versions={"A": 1, "B": 1}
    )
    assert response.error is KafkaErrorCode.NONE
    assert h.group.target("B").partitions == tps(foo=[2, 3])
    assert topic_id("foo") in h.group.target("A").partitions.topics()
