"""The ownership index: clean exactly when no task is active on two holders and no holder keeps
a task its process runs as active; the tasks of a set no holder runs, counted as holders change."""

from __future__ import annotations

from streamtasks.sim.streams.ownership import Holding, OwnershipIndex


def _tasks(*partitions: int) -> frozenset[tuple[str, int]]:
    return frozenset(("0", p) for p in partitions)


def test_a_task_on_two_holders_is_unclean_until_one_lets_go() -> None:
    index = OwnershipIndex()
    index.put("a", Holding("p1", _tasks(0, 1), _tasks()))
    index.put("b", Holding("p2", _tasks(2), _tasks(0)))
    assert index.clean
    index.put("b", Holding("p2", _tasks(1, 2), _tasks(0)))
    assert not index.clean
    index.put("a", None)
    assert index.clean
    assert index.holders == 1


def test_a_standby_beside_an_active_of_its_process_is_unclean() -> None:
    index = OwnershipIndex()
    index.put("a", Holding("p1", _tasks(0), _tasks()))
    index.put("b", Holding("p1", _tasks(1), _tasks(2)))
    assert index.clean
    index.put("a", Holding("p1", _tasks(0, 2), _tasks()))  # b's process now runs 2
    assert not index.clean
    index.put("c", Holding("p2", _tasks(), _tasks(0)))
    index.put("a", Holding("p1", _tasks(0), _tasks()))
    assert index.clean  # a standby of another process' active is fine


def test_missing_counts_the_expected_tasks_no_holder_runs() -> None:
    index = OwnershipIndex()
    index.put("a", Holding("p1", _tasks(0, 9), _tasks()))
    index.expect(_tasks(0, 1, 2))
    assert index.missing == 2
    index.put("b", Holding("p2", _tasks(1, 2), _tasks()))
    assert index.missing == 0
    index.put("a", None)
    assert index.missing == 1
    index.expect(_tasks(0, 1, 2, 3))
    assert index.missing == 2
