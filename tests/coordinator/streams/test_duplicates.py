"""A heartbeat delivered twice whose first answer is lost (the simulator's seed 7102243): when
the second answer carries the member's tasks (Kafka's rule), the case it does not cover (as in
Kafka), and what Kafka's transport delivers instead (a full request after the failure)."""

from __future__ import annotations

from dataclasses import replace

from streamtasks.coordinator.streams import StreamsMemberState
from streamtasks.membership.streams.records import tasks_of
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import StreamsGroupHeartbeatRequest

from .support import GROUP, Harness

ALL = frozenset(("0", p) for p in range(4))


def _revoking_pair() -> Harness:
    """a owned every task at epoch 1; b joined (epoch 2) and waits for two of them; a was told
    to keep two and dropped the others."""
    h = Harness()
    a, b = h.add("a"), h.add("b")
    h.beat(a)
    h.beat(b)
    h.beat(a)
    g = h.coordinator.group(GROUP)
    assert g is not None
    assert g.current("a").state is StreamsMemberState.UNREVOKED_TASKS  # type: ignore[union-attr]
    return h


def test_a_duplicate_at_the_previous_epoch_is_answered_with_the_tasks() -> None:
    h = _revoking_pair()
    a = h.members["a"]
    request = a.request()  # epoch 1, reports the two tasks it kept
    first = h.apply(h.coordinator.heartbeat(request, h.now))
    assert first.member_epoch == 2
    assert tasks_of(first.active_tasks) == a.active
    # the first answer is lost; the copy at the previous epoch (its tasks a subset) is accepted
    second = h.apply(h.coordinator.heartbeat(request, h.now))
    assert second.error is KafkaErrorCode.NONE
    assert second.member_epoch == 2
    assert second.active_tasks is not None, "the answered epoch differs from the sent one"
    assert tasks_of(second.active_tasks) == a.active
    a.take(second)
    assert a.epoch == 2


def test_a_request_reporting_its_tasks_is_answered_with_them() -> None:
    h = _revoking_pair()
    h.beat(h.members["a"])  # a reports its two: epoch 2
    h.round(2)
    a = h.members["a"]
    response = h.beat(a)  # nothing changes, but a reported what it owns (a full request)
    assert tasks_of(response.active_tasks) == a.active


def _released_to_b() -> tuple[Harness, StreamsGroupHeartbeatRequest]:
    """a reported its two (epoch 2), so the other two are released for b; b's next heartbeat
    reports nothing new (a delta request, as a member sends after a good answer)."""
    h = _revoking_pair()
    a, b = h.members["a"], h.members["b"]
    h.beat(a)
    assert b.epoch == 2
    assert b.active == frozenset()
    return h, replace(b.request(), active_tasks=None, standby_tasks=None, warmup_tasks=None)


def test_the_same_delta_request_twice_is_answered_without_the_tasks_as_kafka_does() -> None:
    """The seed-7102243 case, pinned as Kafka's coordinator answers it: the first copy releases
    b's tasks, the second changes nothing and carries none. Kafka's transport never delivers
    this pair (one TCP connection does not duplicate a request; a client retries only after a
    failure, with a full request), so neither Kafka nor streamtasks covers it; the simulator's
    duplicates follow Kafka's transport since (docs/simulation.md)."""
    h, request = _released_to_b()
    first = h.apply(h.coordinator.heartbeat(request, h.now))
    assert tasks_of(first.active_tasks) == ALL - h.members["a"].active
    second = h.apply(h.coordinator.heartbeat(request, h.now))
    assert second.error is KafkaErrorCode.NONE
    assert second.active_tasks is None


def test_a_lost_answer_is_followed_by_a_full_request_that_is_answered_with_the_tasks() -> None:
    """What Kafka's transport delivers instead: the first answer is lost with its connection,
    the member saw the failure and reports every field (here: no tasks), and the coordinator
    answers a full request with the member's tasks."""
    h, request = _released_to_b()
    b = h.members["b"]
    lost = h.apply(h.coordinator.heartbeat(request, h.now))
    assert lost.active_tasks is not None  # this answer never reaches b
    retry = b.request()
    assert retry.active_tasks == ()  # full: b owns nothing and says so
    b.take(h.apply(h.coordinator.heartbeat(retry, h.now)))
    assert b.active == ALL - h.members["a"].active
