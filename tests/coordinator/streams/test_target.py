"""When the streams coordinator computes a target (``coordinator/streams/target.py``): the
initial rebalance delay and the assignment interval, as Apache Kafka 4.4's broker paces them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from streamtasks.coordinator.streams import StreamsCoordinatorConfig, StreamsGroupCoordinator
from streamtasks.coordinator.streams.record_codec import decode_streams_record, encode_streams_record
from streamtasks.coordinator.timers import TimerKey, TimerKind
from streamtasks.errors import ConfigError
from streamtasks.protocol.streams_group import StreamsGroupStatus

from .support import GROUP, Harness

ALL = frozenset(("0", p) for p in range(4))
DELAYED = int(StreamsGroupStatus.ASSIGNMENT_DELAYED)
INITIAL = TimerKey(TimerKind.INITIAL_REBALANCE, GROUP)


def config(delay: int = 0, interval: int = 0) -> StreamsCoordinatorConfig:
    return StreamsCoordinatorConfig(
        session_timeout_ms=30_000,
        heartbeat_interval_ms=1_000,
        initial_rebalance_delay_ms=delay,
        assignment_interval_ms=interval,
    )


def delayed(h: Harness, member_id: str) -> bool:
    last = h.members[member_id].last
    assert last is not None
    return DELAYED in {s.status_code for s in last.status or ()}


def test_the_first_join_to_an_empty_group_waits_the_initial_delay_then_the_timer_assigns() -> None:
    h = Harness(config(delay=3_000))
    a = h.add("a")
    h.beat(a)
    assert h.coordinator.timer_deadline(INITIAL) == 3_000
    assert a.active == frozenset()
    assert delayed(h, "a")
    h.advance(1_000)
    b = h.add("b")
    h.beat(b)  # a second member does not move the timer
    assert h.coordinator.timer_deadline(INITIAL) == 3_000
    h.round()
    assert h.all_active() == frozenset()
    assert delayed(h, "a")
    assert delayed(h, "b")
    group = h.coordinator.group(GROUP)
    assert group is not None
    assert group.target_epoch == 0
    assert group.epoch == 2
    h.advance(2_000)  # the timer computes one target for both joins
    group = h.coordinator.group(GROUP)
    assert group is not None
    assert group.target_epoch == 2
    assert h.coordinator.timer_deadline(INITIAL) is None
    h.round(2)
    assert h.all_active() == ALL
    assert len(a.active) == 2
    assert not delayed(h, "a")


def test_without_a_delay_the_first_heartbeat_assigns_at_once() -> None:
    h = Harness(config())
    a = h.add("a")
    h.beat(a)
    assert a.active == ALL
    assert not delayed(h, "a")
    assert h.coordinator.timer_deadline(INITIAL) is None


def test_the_interval_holds_a_new_target_until_a_heartbeat_after_it() -> None:
    h = Harness(config(interval=1_000))
    a = h.add("a")
    h.now = 10_000
    h.beat(a)
    assert a.active == ALL
    group = h.coordinator.group(GROUP)
    assert group is not None
    assert group.target_meta is not None
    assert group.target_meta.assignment_timestamp_ms == 10_000
    h.now = 10_400
    b = h.add("b")
    h.beat(b)  # owed, but within the interval: b gets nothing yet
    assert b.active == frozenset()
    assert delayed(h, "b")
    h.now = 10_999
    h.beat(a)
    assert a.active == ALL
    assert delayed(h, "a")
    h.now = 11_000  # the first heartbeat at or after the interval computes it
    h.round(3)
    assert h.all_active() == ALL
    assert len(a.active) == 2
    assert not delayed(h, "b")
    group = h.coordinator.group(GROUP)
    assert group is not None
    assert group.target_epoch == group.epoch == 2


def test_a_delay_ending_within_the_interval_leaves_the_target_to_a_later_heartbeat() -> None:
    h = Harness(config(delay=500, interval=1_000))
    a = h.add("a")
    h.now = 5_000
    h.beat(a)
    h.advance(500)
    h.round()
    assert a.active == ALL  # the timer computed at 5,500
    del h.members["a"]
    h.apply(h.coordinator.heartbeat(replace(a.request(), member_epoch=-1), h.now))  # a leaves
    h.now = 5_600
    c = h.add("c")  # the group was empty: a new initial delay
    h.beat(c)
    assert h.coordinator.timer_deadline(INITIAL) == 6_100
    h.advance(500)  # fires at 6,100: 600 ms after the last target, within the interval
    group = h.coordinator.group(GROUP)
    assert group is not None
    assert group.target_epoch < group.epoch
    h.now = 6_500
    h.round(2)
    assert c.active == ALL


def test_the_timestamp_survives_the_log_and_a_fail_over() -> None:
    h = Harness(config(interval=1_000))
    a = h.add("a")
    h.now = 7_000
    h.beat(a)
    meta = next(r for r in h.log if type(r).__name__ == "StreamsTargetMetadataRecord")
    key, value = encode_streams_record(meta)
    assert decode_streams_record(key, value) == meta
    fresh = StreamsGroupCoordinator(config(interval=1_000), image=h.coordinator.image)
    fresh.load([decode_streams_record(*encode_streams_record(r)) for r in h.log], 7_100)
    group = fresh.group(GROUP)
    assert group is not None
    assert group.target_meta is not None
    assert group.target_meta.assignment_timestamp_ms == 7_000
    assert fresh.timer_deadline(INITIAL) is None  # soft state: not rearmed on load


def test_without_an_interval_the_record_bytes_are_unchanged() -> None:
    h = Harness(config())
    h.beat(h.add("a"))
    meta = next(r for r in h.log if type(r).__name__ == "StreamsTargetMetadataRecord")
    _, value = encode_streams_record(meta)
    assert value is not None
    assert value.endswith(b"\x00")


@pytest.mark.parametrize("field", ["initial_rebalance_delay_ms", "assignment_interval_ms"])
def test_negative_settings_are_refused(field: str) -> None:
    with pytest.raises(ConfigError, match=">= 0"):
        StreamsCoordinatorConfig(**{field: -1})  # type: ignore[arg-type]
