"""KIP-429 "Rebalance Callback Error Handling": every callback runs, the first error is re-raised
at the end, the assignment change stands."""

from __future__ import annotations

import pytest

from streamtasks.membership.classic import (
    Action,
    InvokeListener,
    ListenerCompleted,
    ListenerKind,
    SendRequest,
)
from streamtasks.membership.common.listener import RebalanceListener, execute
from tests.membership.classic.helpers import commit_ok, cooperative, join_ok, rejoin, stable, sync_ok, tps
from topology.ids import TopicPartition


class Recorder:
    def __init__(self, fail_on: frozenset[str] = frozenset()) -> None:
        self.calls: list[tuple[str, tuple[TopicPartition, ...]]] = []
        self.fail_on = fail_on

    def _call(self, name: str, partitions: tuple[TopicPartition, ...]) -> None:
        self.calls.append((name, partitions))
        if name in self.fail_on:
            raise RuntimeError(name)

    def on_partitions_revoked(self, partitions: tuple[TopicPartition, ...]) -> None:
        self._call("revoked", partitions)

    def on_partitions_assigned(self, partitions: tuple[TopicPartition, ...]) -> None:
        self._call("assigned", partitions)

    def on_partitions_lost(self, partitions: tuple[TopicPartition, ...]) -> None:
        self._call("lost", partitions)


def revocation_actions() -> tuple[object, list[Action]]:
    member = cooperative()
    stable(member, tps("t0 t1"))
    member.enforce_rebalance()
    _, rid, _ = rejoin(member, 0)
    _, sid, _ = join_ok(member, rid, generation=2)
    return member, commit_ok(member, sync_ok(member, sid, tps("t1 t2")))


def test_recorder_is_a_rebalance_listener() -> None:
    assert isinstance(Recorder(), RebalanceListener)


def test_execute_runs_every_callback_and_reraises_the_first_error() -> None:
    member, actions = revocation_actions()
    listener = Recorder(fail_on=frozenset({"revoked", "assigned"}))
    others: list[Action] = []
    done: list[tuple[ListenerKind, bool]] = []
    with pytest.raises(RuntimeError, match="revoked"):
        execute(actions, listener, others.append, lambda a, err: done.append((a.kind, err is not None)))
    assert listener.calls == [("revoked", tps("t0")), ("assigned", tps("t2"))]
    assert [type(a).__name__ for a in others] == ["AssignmentChanged", "SendRequest"]  # rejoin still sent
    assert done == [(ListenerKind.REVOKED, True), (ListenerKind.ASSIGNED, True)]
    assert member.owned_partitions == frozenset(tps("t1 t2"))  # change stands


def test_execute_without_errors_runs_in_order() -> None:
    _, actions = revocation_actions()
    listener = Recorder()
    sent: list[Action] = []
    execute(actions, listener, sent.append)
    assert [c[0] for c in listener.calls] == ["revoked", "assigned"]
    assert any(isinstance(a, SendRequest) for a in sent)


def test_listener_completed_feeds_the_latency_metrics_and_reports_failures() -> None:
    member, actions = revocation_actions()
    calls = [a for a in actions if isinstance(a, InvokeListener)]
    member.handle(ListenerCompleted(invocation_id=calls[0].invocation_id, failed=True), 40)
    member.handle(ListenerCompleted(invocation_id=calls[1].invocation_id), 10)
    metrics = member.metrics(50)
    assert metrics["partitions-revoked-latency-max"] == 40
    assert metrics["partitions-assigned-latency-avg"] == 10
    assert metrics["errors-reported-total"] == 1


def test_listener_completed_for_an_unknown_invocation_is_a_driver_bug() -> None:
    from streamtasks.errors import LocalProtocolError

    member = cooperative()
    with pytest.raises(LocalProtocolError):
        member.handle(ListenerCompleted(invocation_id=99), 0)
