"""A heartbeat delivered twice whose first answer is lost (the simulator's seed 7102243): when
the second answer carries the member's tasks (Kafka's rule) and the case it does not cover."""

from __future__ import annotations

from dataclasses import replace

import pytest

from streamtasks.coordinator.streams import StreamsMemberState
from streamtasks.membership.streams.records import tasks_of
from streamtasks.protocol.errors import KafkaErrorCode

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


@pytest.mark.xfail(
    strict=True,
    reason="open: Kafka's rule (join, changed tasks, other epoch, full request) does not cover "
    "a duplicate at the same epoch without owned tasks (seed 7102243); docs/streams-groups.md",
)
def test_a_duplicate_that_released_tasks_without_reporting_owned_ones() -> None:
    h = _revoking_pair()
    a, b = h.members["a"], h.members["b"]
    h.beat(a)  # a reports its two: epoch 2, the other two are released
    assert b.epoch == 2
    assert b.active == frozenset()
    request = replace(b.request(), active_tasks=None, standby_tasks=None, warmup_tasks=None)
    first = h.apply(h.coordinator.heartbeat(request, h.now))
    assert tasks_of(first.active_tasks) == ALL - a.active  # this answer is lost
    second = h.apply(h.coordinator.heartbeat(request, h.now))
    b.take(second)
    assert b.active == ALL - a.active
