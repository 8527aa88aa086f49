"""Answers to heartbeats the member no longer waits for (a duplicate, or one it gave up on).
The coordinator counts an assignment it put in such an answer as delivered; the member does not
read it, so its next heartbeat is a full one (owned partitions included) and the coordinator,
finding them different from the assignment, sends it again. Found by the simulator: seed
1691880284 of ``--protocol mixed`` (tests/sim/test_findings.py). Time is the test's clock."""

from __future__ import annotations

from streamtasks.membership.consumer import ResponseReceived
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from tests.ids import tps
from tests.membership.consumer.helpers import Cluster

ALL = tps("foo-0", "foo-1", "foo-2", "foo-3")


def _heartbeats(sent: list[object]) -> list[ConsumerGroupHeartbeatRequest]:
    return [r for r in sent if isinstance(r, ConsumerGroupHeartbeatRequest)]


def test_an_assignment_in_a_duplicate_answer_is_sent_again() -> None:
    """b waits for two partitions a still owns. b's heartbeat is answered (nothing released
    yet); a releases them; a second copy of that heartbeat reaches the coordinator, whose
    answer hands b the two partitions — an answer b does not read (it was answered). Before
    the fix b heartbeated on with nothing to say, the coordinator never repeated the
    assignment and the two partitions stayed unowned."""
    c = Cluster()
    a = c.add("a")
    c.run(2_000)
    assert c.owned("a") == ALL
    a.hold_commits = True
    b = c.add("b")
    while not any(hb.member_epoch > 0 for hb in _heartbeats(b.sent)):  # b has joined
        c.tick(10)
    assert c.owned("b") == frozenset()
    b.hold = True
    while not b.held:
        c.tick(10)
    (rid, request), *_ = b.held
    b.held.clear()
    c.answer("b", rid, request)  # the first copy: nothing released yet
    assert c.owned("b") == frozenset()
    c.release("a")  # a commits and revokes; its next heartbeat acknowledges
    for _ in range(300):
        if len(c.owned("a")) == 2 and not c.group().current_assignments["a"].pending_revocation:
            break
        c.tick(10)
    assert len(c.owned("a")) == 2
    duplicate = c.write(request)  # the second copy, processed now: it carries the assignment
    assert duplicate.assignment is not None
    assert any(item.partitions for item in duplicate.assignment.topic_partitions)
    before = len(b.sent)
    c.handle("b", ResponseReceived(request_id=rid, response=duplicate))  # not read: answered
    assert c.owned("b") == frozenset()
    c.release("b")  # b's next heartbeat, held meanwhile (sent before the duplicate answer)
    c.run(3_000)
    after = _heartbeats(b.sent[before:])
    assert after[0].topic_partitions == ()  # a full heartbeat: what b owns (nothing)
    assert after[0].rebalance_timeout_ms > 0
    assert c.owned("b") | c.owned("a") == ALL
    assert len(c.owned("b")) == 2
    c.assert_exclusive()
