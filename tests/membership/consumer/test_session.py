"""The member's session rule: it gives its partitions up when no heartbeat sent within the
coordinator's session timeout was answered; the timeout is the coordinator's once the runtime
read it (``SessionTimeoutKnown``), and it counts from the answered heartbeat's send time."""

from __future__ import annotations

import pytest

from streamtasks.errors import ConfigError
from streamtasks.membership.classic import ListenerKind
from streamtasks.membership.consumer import SessionTimeoutKnown
from tests.membership.consumer.helpers import Cluster, Node
from tests.membership.consumer.test_coordinator_restart import stable_pair

COORDINATOR_SESSION_MS = 10_000  # the helpers' coordinator


def fenced(node: Node) -> bool:
    return any("session timeout" in e.reason for e in node.errors)


def held_heartbeat_sent_at(c: Cluster, node: Node) -> int:
    """Hold the member's requests; the time its next heartbeat was sent (and held)."""
    node.hold = True
    for _ in range(50):
        if node.held:
            return c.now
        c.tick(100)
    raise AssertionError("no heartbeat sent in 5 s")


def test_the_coordinator_session_timeout_replaces_the_configured_one() -> None:
    c = stable_pair(session_timeout_ms=6_000)
    a = c.nodes["a"]
    c.handle("a", SessionTimeoutKnown(session_timeout_ms=COORDINATOR_SESSION_MS, source="test"))
    assert a.member.config.session_timeout_ms == COORDINATOR_SESSION_MS
    a.hold = True
    c.run(8_000)  # past the configured 6 s: the coordinator still has it
    assert not fenced(a)
    assert a.member.owned_partitions
    c.run(2_500)
    assert fenced(a)
    assert a.member.owned_partitions == frozenset()
    assert any(kind is ListenerKind.LOST for kind, _ in a.listener)


def test_without_the_event_the_configured_timeout_stands() -> None:
    c = stable_pair(session_timeout_ms=6_000)
    a = c.nodes["a"]
    a.hold = True
    c.run(6_500)
    assert fenced(a)


def test_the_session_counts_from_the_answered_heartbeats_send_time() -> None:
    """A heartbeat answered 3 s after it was sent: the deadline is its send time plus the
    session timeout (the coordinator's timer restarted when it processed it), not the answer's
    time plus the timeout."""
    c = stable_pair()
    a = c.nodes["a"]
    sent_at = held_heartbeat_sent_at(c, a)
    c.run(3_000)
    c.release("a")  # answered now, 3 s after it was sent
    a.hold = True  # nothing answered from here on
    c.run(sent_at + COORDINATOR_SESSION_MS - 100 - c.now)
    assert not fenced(a)
    c.run(300)
    assert fenced(a)
    assert c.now < sent_at + 3_000 + COORDINATOR_SESSION_MS  # before the answer-time deadline


def test_a_session_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="positive"):
        SessionTimeoutKnown(session_timeout_ms=0)
