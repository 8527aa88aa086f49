"""The commit before a revocation both members hold: open, due, commit, retry, finish."""

from __future__ import annotations

from streamtasks.membership.common import CommitGate, Kernel, Purpose
from tests.ids import tps
from tests.membership.common.test_kernel import Api, Send, State, kernel


def _gate() -> tuple[Kernel[State, Api, str, Send], CommitGate[Api]]:
    k = kernel()
    return k, CommitGate(k, Api.PING)


def test_a_gate_is_due_at_its_retry_time_with_the_coordinator_known_and_no_commit_in_flight() -> None:
    _, gate = _gate()
    assert gate.due(0, True) is None  # no gate
    gate.open(Purpose.LEAVE, tps("t-0"), 100, 500)
    assert gate.due(99, True) is None
    assert gate.due(100, False) is None
    assert gate.due(100, True) is gate.gate
    gate.commit(200, 1)
    assert gate.due(100, True) is None  # the commit is in flight


def test_a_commit_is_issued_through_the_kernel_and_settled_when_the_gate_finishes() -> None:
    k, gate = _gate()
    gate.open(Purpose.RECONCILE, tps("t-0", "t-1"), 0, 500)
    rid = gate.commit(300, 4)
    assert k.requests.inflight[rid].generation == 4
    finished = gate.finish()
    assert (finished.commit_id, finished.partitions) == (rid, tps("t-0", "t-1"))
    assert gate.gate is None
    assert rid not in k.requests.inflight


def test_an_answered_commit_can_be_retried_and_a_lost_coordinator_makes_it_due_now() -> None:
    _, gate = _gate()
    gate.open(Purpose.JOIN, tps("t-0"), 0, 500)
    gate.commit(300, 1)
    answered = gate.answered()
    assert answered is not None
    assert answered.commit_id is None
    gate.retry_at(50)
    assert gate.due(49, True) is None
    gate.commit(300, 1)
    gate.resend(20)
    assert gate.due(20, True) is not None


def test_the_deadline_and_partitions_that_no_longer_exist() -> None:
    _, gate = _gate()
    assert not gate.expired(10_000)
    gate.open(Purpose.SYNC, tps("t-0", "t-1"), 0, 500, assignment=tps("t-1", "u-0"), user_data=b"u")
    assert not gate.expired(499)
    assert gate.expired(500)
    gate.without(tps("t-1"))
    assert gate.gate is not None
    assert (gate.gate.partitions, gate.gate.assignment, gate.gate.user_data) == (tps("t-0"), tps("u-0"), b"u")
    gate.close()
    assert gate.gate is None
    assert gate.answered() is None
