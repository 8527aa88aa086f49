"""One process' tasks spread over its members (``assign._spread``): sticky within each member's
share, balanced, the first member in order winning a task two members hold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from streamtasks.coordinator.streams.assign import MemberTarget, _spread
from streamtasks.membership.streams.records import Task


@dataclass(frozen=True)
class _Current:
    active: frozenset[Task] = frozenset()
    pending_revocation: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()


class _Group:
    def __init__(self, currents: dict[str, _Current]) -> None:
        self.currents = currents

    def current(self, member_id: str) -> _Current | None:
        return self.currents.get(member_id)


def _tasks(*partitions: int) -> frozenset[Task]:
    return frozenset(("0", p) for p in partitions)


def test_two_members_of_one_process_keep_what_they_have_within_their_share() -> None:
    group = _Group(
        {
            "a": _Current(active=_tasks(0, 1), pending_revocation=_tasks(2), warmup=_tasks(6)),
            "b": _Current(standby=_tasks(5), warmup=_tasks(6)),
        }
    )
    got = _spread(cast(Any, group), ["a", "b"], (_tasks(0, 1, 2, 3), _tasks(4, 5), _tasks(6)))
    assert got == {
        # a's share of four actives is two: it keeps 0 and 1, its pending 2 goes to b with 3
        "a": MemberTarget(active=_tasks(0, 1), standby=_tasks(4), warmup=_tasks(6)),
        "b": MemberTarget(active=_tasks(2, 3), standby=_tasks(5), warmup=frozenset()),
    }


def test_a_member_without_a_current_assignment_gets_its_share() -> None:
    group = _Group({"a": _Current(active=_tasks(0, 1, 2))})
    got = _spread(cast(Any, group), ["a", "b", "c"], (_tasks(0, 1, 2), frozenset(), frozenset()))
    assert [len(got[m].active) for m in "abc"] == [1, 1, 1]
    assert got["a"].active == _tasks(0)


def test_a_process_of_one_member_gets_everything() -> None:
    kinds = (_tasks(0, 1), _tasks(2), _tasks(3))
    got = _spread(cast(Any, _Group({})), ["only"], kinds)
    assert got == {"only": MemberTarget(active=_tasks(0, 1), standby=_tasks(2), warmup=_tasks(3))}
