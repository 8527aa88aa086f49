"""What a member owns, held by both members: assign, revoke, lose, lose everything, metadata gone."""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.membership.common import AssignmentChanged, Holdings, InvokeListener, ListenerKind
from tests.ids import tps
from tests.membership.common.test_kernel import kernel
from topology.ids import TopicPartition


@dataclass(frozen=True, slots=True, kw_only=True)
class Owned:
    owned: frozenset[TopicPartition] = frozenset()
    owned_generation: int = -1
    user_data: bytes = b""
    previous: tuple[TopicPartition, ...] = ()


def _held(owned: frozenset[TopicPartition] = frozenset(), generation: int = -1) -> Holdings[Owned]:
    return Holdings(kernel(), Owned(owned=owned, owned_generation=generation, user_data=b"ud"), -1)


def _actions(held: Holdings[Owned]) -> list[object]:
    return list(held._k.flush())  # type: ignore[attr-defined]


def test_an_assignment_calls_revoked_then_assigned_around_its_change() -> None:
    held = _held(tps("t-0", "t-1"), 3)
    held.assign(tps("t-1", "t-2"), 4, 100, revoked=tps("t-0"), user_data=b"new", previous=())
    revoked, changed, assigned = _actions(held)
    assert isinstance(revoked, InvokeListener)
    assert revoked.kind is ListenerKind.REVOKED
    assert revoked.partitions == tuple(sorted(tps("t-0")))
    assert changed == AssignmentChanged(
        generation=4,
        owned=tuple(sorted(tps("t-1", "t-2"))),
        added=tuple(sorted(tps("t-2"))),
        removed=tuple(sorted(tps("t-0"))),
        user_data=b"new",
    )
    assert isinstance(assigned, InvokeListener)
    assert assigned.kind is ListenerKind.ASSIGNED
    assert assigned.partitions == tuple(sorted(tps("t-2")))
    assert (held.owned, held.record.owned_generation, held.record.user_data) == (tps("t-1", "t-2"), 4, b"new")


def test_an_assignment_with_nothing_new_still_calls_assigned() -> None:
    held = _held(tps("t-0"), 3)
    held.assign(tps("t-0"), 4, 100)
    changed, assigned = _actions(held)
    assert isinstance(changed, AssignmentChanged)
    assert changed.generation == 4
    assert isinstance(assigned, InvokeListener)
    assert assigned.partitions == ()


def test_a_revocation_gives_up_only_what_is_owned_and_keeps_the_generation() -> None:
    held = _held(tps("t-0", "t-1"), 3)
    held.revoke(tps("t-1", "t-9"), 100, 5)
    revoked, changed = _actions(held)
    assert isinstance(revoked, InvokeListener)
    assert revoked.partitions == tuple(sorted(tps("t-1")))
    assert isinstance(changed, AssignmentChanged)
    assert (changed.removed, changed.lost, changed.generation) == (tuple(sorted(tps("t-1"))), (), 3)
    held.revoke(tps("t-9"), 100, 5)
    assert _actions(held) == []


def test_losing_everything_drops_the_user_data_and_names_the_partitions_lost() -> None:
    held = _held(tps("t-0"), 3)
    held.lose_all(100, 3, previous=tuple(sorted(tps("t-0"))))
    lost, changed = _actions(held)
    assert isinstance(lost, InvokeListener)
    assert lost.kind is ListenerKind.LOST
    assert isinstance(changed, AssignmentChanged)
    assert (changed.generation, changed.lost, changed.user_data) == (-1, tuple(sorted(tps("t-0"))), b"")
    assert (held.owned, held.record.user_data, held.record.previous) == (
        frozenset(),
        b"",
        tuple(sorted(tps("t-0"))),
    )
    held.lose_all(100, 3)
    assert _actions(held) == []  # nothing owned: nothing to call


def test_partitions_gone_from_the_metadata_are_lost() -> None:
    held = _held(tps("t-0", "t-3", "u-0"), 3)
    gone = held.lose_gone({"t": 2}, 100, 3)
    assert gone == tps("t-3", "u-0")
    lost, changed = _actions(held)
    assert isinstance(lost, InvokeListener)
    assert lost.kind is ListenerKind.LOST
    assert isinstance(changed, AssignmentChanged)
    assert changed.lost == tuple(sorted(gone))
    assert held.owned == tps("t-0")
    assert held.lose_gone({"t": 2}, 100, 3) == frozenset()
    assert _actions(held) == []
