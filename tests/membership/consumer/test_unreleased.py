"""Waiting for unreleased partitions: a member whose assignment names partitions still owned by
another member heartbeats sooner (``unreleased_heartbeat_ms``, within a bounded window), and a
member whose InstallAssignment was taken heartbeats at once. Time is the test's clock."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest

from assignors.partition.range import RangeAssignor
from streamtasks.errors import ConfigError
from streamtasks.membership.consumer import ConsumerMemberConfig, MemberState
from streamtasks.membership.consumer import phases as P
from streamtasks.membership.consumer.config import UNRELEASED_WINDOW_INTERVALS
from streamtasks.membership.consumer.records import Link
from streamtasks.protocol.assignment_rpc import ConsumerGroupInstallAssignmentRequest
from streamtasks.protocol.consumer_group import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    TopicIdPartitions,
)
from streamtasks.protocol.errors import KafkaErrorCode
from tests.ids import tps
from tests.membership.consumer.helpers import Cluster

ALL = tps("foo-0", "foo-1", "foo-2", "foo-3")
INTERVAL = 1_000  # the helpers' coordinator and members


def heartbeats_at(node: Any, c: Cluster, ms: int, step: int = 10) -> list[int]:
    """Run the cluster ``ms`` in ``step`` ticks; the times at which ``node`` sent heartbeats."""
    times = []
    for _ in range(ms // step):
        before = len(node.sent)
        c.tick(step)
        times += [c.now for r in node.sent[before:] if isinstance(r, ConsumerGroupHeartbeatRequest)]
    return times


def between(times: list[int]) -> list[int]:
    return [t2 - t1 for t1, t2 in itertools.pairwise(times)]


def waiting_pair(**b_config: Any) -> Cluster:
    """a owns all four partitions; b has joined and been told of the two a must release, and a
    holds its commit (so it does not release them)."""
    c = Cluster()
    c.add("a")
    c.run(2_000)
    assert c.owned("a") == ALL
    c.nodes["a"].hold_commits = True
    c.add("b", **b_config)
    c.tick(10)
    assert c.owned("b") == frozenset()
    return c


def test_a_member_waiting_for_unreleased_partitions_heartbeats_sooner() -> None:
    c = waiting_pair()
    b = c.nodes["b"]
    times = heartbeats_at(b, c, 1_000)
    gaps = between(times)
    assert len(gaps) >= 5
    assert max(gaps) <= 110  # every 100 ms (answers are instant), not every 1,000 ms


def test_the_partitions_arrive_soon_after_their_owner_releases_them() -> None:
    c = waiting_pair()
    c.run(1_500)  # a has heard of its revocation and is committing
    assert c.nodes["a"].member.state is MemberState.RECONCILING
    assert c.owned("b") == frozenset()
    c.release("a")  # a commits, revokes, and acknowledges at once
    c.run(200, step=10)
    c.assert_exclusive()
    assert len(c.owned("b")) == 2  # within two fast heartbeats, not an interval later


def test_off_the_member_keeps_the_interval() -> None:
    c = waiting_pair(unreleased_heartbeat_ms=0)
    times = heartbeats_at(c.nodes["b"], c, 3_500)[1:]  # after the first answer's acknowledgement
    gaps = between(times)
    assert len(gaps) >= 2
    assert min(gaps) >= INTERVAL


def test_the_sooner_heartbeats_stop_after_the_window() -> None:
    c = waiting_pair()
    b = c.nodes["b"]
    window = UNRELEASED_WINDOW_INTERVALS * INTERVAL
    start = c.now
    times = heartbeats_at(b, c, window + 4_000)
    assert [t for t in times if t < start + window][1:] == list(range(times[1], start + window, 100))
    late = [t for t in times if t > start + window + 100]
    gaps = between(late)
    assert c.owned("b") == frozenset()  # a still holds its commit
    assert len(gaps) >= 2
    assert min(gaps) >= INTERVAL


def test_a_member_heartbeats_at_once_after_its_install() -> None:
    c = Cluster()
    a = c.add("a", client_assignors=(RangeAssignor(),))
    c.run(2_000)
    a.hold = True
    c.add("b", client_assignors=(RangeAssignor(),))
    c.run(1_000, step=10)  # a's heartbeat asking it to compute is held
    held = len(a.held)
    assert held
    c.release("a")
    for _ in range(20):  # prepare, install: each answered at once, then a heartbeat
        installs = [i for i, r in enumerate(a.sent) if isinstance(r, ConsumerGroupInstallAssignmentRequest)]
        if installs:
            break
        c.tick(10)
    assert installs
    c.tick()  # the same instant: no interval waited
    after = a.sent[installs[-1] + 1 :]
    assert any(isinstance(r, ConsumerGroupHeartbeatRequest) for r in after)


# ------------------------------------------------------------------ after enforce_rebalance


def asking_pair() -> Cluster:
    """a and b, the range assignor client-side, stable (a computes the assignments)."""
    c = Cluster()
    c.add("a", client_assignors=(RangeAssignor(),))
    c.run(2_000)
    c.add("b", client_assignors=(RangeAssignor(),))
    c.run(4_000)
    assert c.nodes["a"].member.state is c.nodes["b"].member.state is MemberState.STABLE
    assert len(c.owned("b")) == 2
    return c


def test_a_member_that_asked_for_a_new_assignment_heartbeats_sooner_until_it_comes() -> None:
    c = asking_pair()
    a, b = c.nodes["a"], c.nodes["b"]
    asked_at = b.member.member_epoch
    # a is asked to compute (its own Reason changed) and does not hear of it: the coordinator
    # has its heartbeat, a waits for the answer (written again, unchanged, at its release)
    a.hold = True
    assert a.member.enforce_rebalance("own", c.now)
    c.tick(10)
    ((_, request),) = a.held
    c.write(request)
    assert c.group().client_request.member_id == "a"
    # so b's Reason is not b's to compute (the coordinator asks the member whose heartbeat
    # bumps the epoch only when nobody is asked yet): b waits for a's assignment
    assert b.member.enforce_rebalance("lag", c.now)
    window = UNRELEASED_WINDOW_INTERVALS * INTERVAL
    start = c.now
    times = heartbeats_at(b, c, window + 3_000)
    assert times[0] == start + 10  # the Reason goes at the first poll
    assert max(between([t for t in times if t <= start + window])) <= 110
    late = [t for t in times if t > start + window + 100]
    assert len(late) >= 2
    assert min(between(late)) >= INTERVAL  # the window is over: back to the interval
    assert b.member.member_epoch == asked_at
    c.release("a")
    c.run(2_000, step=10)
    assert b.member.member_epoch > asked_at
    c.assert_exclusive()


def test_the_sooner_heartbeats_stop_once_the_new_assignment_came() -> None:
    c = asking_pair()
    b = c.nodes["b"]
    asked_at = b.member.member_epoch
    assert b.member.enforce_rebalance("lag", c.now)
    moved = None
    for _ in range(200):  # a hears it must compute at its next heartbeat (within an interval)
        c.tick(10)
        if b.member.member_epoch > asked_at:
            moved = c.now
            break
    assert moved is not None
    times = heartbeats_at(b, c, 4_000)
    assert len(times) >= 3
    assert min(between(times)) >= INTERVAL


def test_asked_since_ends_with_an_epoch_past_the_one_asked_at() -> None:
    assert P.asked_since(answer(None), None, 3) is None
    assert P.asked_since(answer(None), 20, 3) == 20  # answer(...) is at epoch 3: still waiting
    assert P.asked_since(answer(None), 20, 2) is None


# ------------------------------------------------------------------ the pure functions


def answer(pending: tuple[TopicIdPartitions, ...] | None) -> ConsumerGroupHeartbeatResponse:
    assignment = (
        None
        if pending is None
        else HeartbeatAssignment(topic_partitions=(), pending_topic_partitions=pending)
    )
    return ConsumerGroupHeartbeatResponse(
        error=KafkaErrorCode.NONE, member_epoch=3, heartbeat_interval_ms=INTERVAL, assignment=assignment
    )


SOME = (TopicIdPartitions(topic_id=uuid.uuid4(), partitions=(1,)),)


def test_unreleased_since_follows_the_assignments() -> None:
    assert P.unreleased_since(answer(SOME), None, 50) == 50
    assert P.unreleased_since(answer(SOME), 20, 50) == 20  # still waiting: the window is not reset
    assert P.unreleased_since(answer(None), 20, 50) == 20  # no assignment: nothing changed
    assert P.unreleased_since(answer(()), 20, 50) is None
    empty = (TopicIdPartitions(topic_id=uuid.uuid4(), partitions=()),)
    assert P.unreleased_since(answer(empty), 20, 50) is None


def test_next_heartbeat_ms() -> None:
    config = ConsumerMemberConfig(group_id="g", member_id="m", topics=("foo",))
    link = Link(
        coordinator_known=True, find_retry_ms=0, interval_ms=INTERVAL, hb_next_ms=1_500, hb_last_ok_ms=0
    )
    assert P.next_heartbeat_ms(config, link, None, 500) == 1_500
    assert P.next_heartbeat_ms(config, link, 400, 500) == 600
    end = 400 + UNRELEASED_WINDOW_INTERVALS * INTERVAL
    assert P.next_heartbeat_ms(config, link, 400, end) == 1_500
    off = ConsumerMemberConfig(group_id="g", member_id="m", topics=("foo",), unreleased_heartbeat_ms=0)
    assert P.next_heartbeat_ms(off, link, 400, 500) == 1_500
    slow = ConsumerMemberConfig(group_id="g", member_id="m", topics=("foo",), unreleased_heartbeat_ms=5_000)
    assert P.next_heartbeat_ms(slow, link, 400, 500) == 1_500


def test_a_negative_unreleased_heartbeat_is_refused() -> None:
    with pytest.raises(ConfigError):
        ConsumerMemberConfig(group_id="g", member_id="m", topics=("foo",), unreleased_heartbeat_ms=-1)
