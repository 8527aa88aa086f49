"""The kernel both members hold: state by trigger, the action list, requests and listener calls."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pytest

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.common import (
    ErrorReported,
    FindCoordinator,
    InvokeListener,
    Kernel,
    Leave,
    ListenerCompleted,
    ListenerKind,
    Transitions,
)
from streamtasks.membership.common.kernel import handler_for
from streamtasks.protocol.errors import KafkaErrorCode
from tests.ids import tps


class State(enum.Enum):
    IDLE = "idle"
    BUSY = "busy"


class Api(enum.Enum):
    PING = "Ping"


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    request_id: int
    request: str


TABLE = Transitions(
    ((State.IDLE, "work", State.BUSY), (State.BUSY, "rest", State.IDLE)), {Leave: frozenset({State.BUSY})}
)


def kernel() -> Kernel[State, Api, str, Send]:
    return Kernel(TABLE, State.IDLE, Send, {Api.PING: int})


def test_goto_follows_the_table() -> None:
    k = kernel()
    k.goto("work")
    assert k.state is State.BUSY
    with pytest.raises(LocalProtocolError, match="illegal transition"):
        k.goto("work")
    assert k.state is State.BUSY


def test_start_checks_the_event_and_clears_the_actions() -> None:
    k = kernel()
    k.report("left over", None)
    with pytest.raises(LocalProtocolError, match="Leave is not allowed in state IDLE"):
        k.start(Leave())
    k.goto("work")
    k.start(Leave())
    assert k.flush() == []


def test_actions_come_out_in_order_once() -> None:
    k = kernel()
    k.begin()
    rid = k.send(Api.PING, "hello", deadline_ms=100, generation=3)
    k.find("g", deadline_ms=100, generation=3)
    k.report("oops", KafkaErrorCode.UNKNOWN_MEMBER_ID, fatal=True)
    out = k.flush()
    assert out == [
        Send(request_id=rid, request="hello"),
        FindCoordinator(request_id=rid + 1, group_id="g"),
        ErrorReported(reason="oops", code=KafkaErrorCode.UNKNOWN_MEMBER_ID, fatal=True),
    ]
    assert k.flush() == []
    assert k.requests.in_flight(Api.PING)
    assert k.requests.finds_in_flight()


def test_answers_and_failures_settle_requests() -> None:
    k = kernel()
    rid = k.send(Api.PING, "x", deadline_ms=100, generation=7)
    with pytest.raises(LocalProtocolError, match="got str"):
        k.answer(rid, "not an int")
    pending = k.answer(rid, 5)
    assert pending is not None
    assert pending.generation == 7
    assert k.answer(rid, 5) is None  # a duplicate
    assert k.fail(rid) is None
    with pytest.raises(LocalProtocolError, match="ever issued"):
        k.fail(rid + 1)


def test_a_lookup_answer_drops_the_lookups_only() -> None:
    k = kernel()
    ping = k.send(Api.PING, "x", deadline_ms=100, generation=0)
    find = k.issue(None, deadline_ms=100, generation=0)
    assert not k.discovered(ping)  # answers no lookup
    assert k.discovered(find)
    assert not k.requests.finds_in_flight()
    assert k.requests.in_flight(Api.PING)
    k.keep({None})
    assert not k.requests.inflight


def test_listener_calls_are_remembered_until_reported() -> None:
    k = kernel()
    k.listener(ListenerKind.REVOKED, tps("a-1", "a-0"), now_ms=40, generation=2)
    (call,) = k.flush()
    assert isinstance(call, InvokeListener)
    assert call.partitions == tuple(sorted(tps("a-0", "a-1")))
    done = ListenerCompleted(invocation_id=call.invocation_id)
    assert k.listener_completed(done) == (ListenerKind.REVOKED, 40)
    assert k.listener_completed(done) is None  # reported twice
    with pytest.raises(LocalProtocolError, match="unknown invocation"):
        k.listener_completed(ListenerCompleted(invocation_id=call.invocation_id + 1))


def test_an_event_no_member_handles_is_refused() -> None:
    handlers = {Leave: "leave"}
    assert handler_for(handlers, Leave()) == "leave"
    with pytest.raises(LocalProtocolError, match="str is not an event this member handles"):
        handler_for(handlers, "Leave")
