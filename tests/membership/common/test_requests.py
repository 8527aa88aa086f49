"""What the classic and the KIP-848 member share: the Requests record and the action builders."""

from __future__ import annotations

import enum

import pytest

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic.actions import ListenerKind
from streamtasks.membership.common import (
    MAX_OPEN_INVOCATIONS,
    Requests,
    answered,
    assignment_changed,
    check_issued,
    listener_call,
    lookup_answered,
    lookup_backoff_ms,
)
from tests.ids import tps


class Api(enum.Enum):
    PING = "Ping"
    PONG = "Pong"


def _empty() -> Requests[Api]:
    return Requests()


def test_issued_and_settled_requests() -> None:
    r0: Requests[Api] = Requests()
    r1, first = r0.issued(Api.PING, 100, 3)
    r2, second = r1.issued(None, 200, 3)
    assert (first, second) == (1, 2)
    assert r0.inflight == {}  # records are not changed
    assert r2.in_flight(Api.PING)
    assert r2.finds_in_flight()
    assert not r2.in_flight(Api.PONG)
    r3, found = r2.settled(1)
    assert found is not None
    assert found.api is Api.PING
    assert found.generation == 3
    assert r3.settled(1) == (r3, None)
    assert r2.keeping(frozenset({None})).inflight.keys() == {2}


def test_invocations_are_remembered_up_to_a_bound() -> None:
    r: Requests[Api] = Requests()
    for _ in range(MAX_OPEN_INVOCATIONS + 1):
        r, n = r.invoked(ListenerKind.ASSIGNED, 5)
    assert n == MAX_OPEN_INVOCATIONS + 1
    assert len(r.invocations) == MAX_OPEN_INVOCATIONS
    assert 1 not in r.invocations
    assert n not in r.reported(n).invocations


def test_a_response_is_checked_against_the_request_it_answers() -> None:
    r, rid = _empty().issued(Api.PING, 100, 0)
    expects = {Api.PING: int}
    assert answered(r, rid, 7, expects) is not None
    with pytest.raises(LocalProtocolError, match="was Ping, got str"):
        answered(r, rid, "x", expects)
    with pytest.raises(LocalProtocolError, match="was ever issued"):
        answered(r, rid + 1, 7, expects)
    assert answered(r.settled(rid)[0], rid, 7, expects) is None  # no longer waited for
    with pytest.raises(LocalProtocolError):
        check_issued(r, 0)


def test_lookup_answered() -> None:
    r, find = _empty().issued(None, 100, 0)
    r, ping = r.issued(Api.PING, 100, 0)
    assert lookup_answered(r, None)
    assert lookup_answered(r, find)
    assert not lookup_answered(r, ping)
    with pytest.raises(LocalProtocolError):
        lookup_answered(r, 9)


def test_assignment_changed_reports_only_removed_partitions_as_lost() -> None:
    change = assignment_changed(tps("a-0", "a-1"), tps("a-1", "a-2"), 4, b"u", lost=tps("a-0", "a-1"))
    assert change.added == tuple(sorted(tps("a-2")))
    assert change.removed == tuple(sorted(tps("a-0")))
    assert change.lost == tuple(sorted(tps("a-0")))
    assert (change.generation, change.user_data) == (4, b"u")
    call = listener_call(3, ListenerKind.REVOKED, tps("a-1", "a-0"), 4)
    assert call.partitions == tuple(sorted(tps("a-0", "a-1")))
    assert call.invocation_id == 3


def test_lookup_backoff_doubles_from_the_base_up_to_the_cap() -> None:
    waits = [lookup_backoff_ms(100, 1_000, failures) for failures in range(0, 8)]
    assert waits == [100, 100, 200, 400, 800, 1_000, 1_000, 1_000]
    assert lookup_backoff_ms(100, 1_000, 10_000) == 1_000  # no overflow however long it fails
    assert lookup_backoff_ms(250, 100, 5) == 250  # a cap below the base leaves the base
