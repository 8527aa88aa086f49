"""The KIP-848 member's per-phase logic, tested directly as pure functions over its records."""

from __future__ import annotations

import uuid

import pytest

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.common import CommitGate, InFlight, Kernel, Purpose, Requests
from streamtasks.membership.common.states import MemberState as S
from streamtasks.membership.consumer import ConsumerMemberConfig
from streamtasks.membership.consumer.actions import Request, SendRequest
from streamtasks.membership.consumer.assignment_job import AssignmentJob
from streamtasks.membership.consumer.events import AssignorMetadata
from streamtasks.membership.consumer.phases import (
    Commit,
    bumped_reasons,
    check_assignor_metadata,
    commit_verdict,
    dropped,
    heartbeat_request,
    leave_request,
    next_deadline,
    next_pending,
    owned_wire,
    resolve,
)
from streamtasks.membership.consumer.records import (
    Api,
    Link,
    Membership,
    Ownership,
    Round,
    Sent,
    Subscribed,
    Target,
)
from streamtasks.membership.consumer.transitions import TABLE
from streamtasks.protocol.classic_group import OffsetCommitResponse
from streamtasks.protocol.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    TopicIdPartitions,
)
from streamtasks.protocol.errors import KafkaErrorCode as E
from tests.ids import tp, tps

FOO = uuid.uuid5(uuid.NAMESPACE_OID, "foo")
BAR = uuid.uuid5(uuid.NAMESPACE_OID, "bar")
IDS = {"foo": FOO, "bar": BAR}
NAMES = {FOO: "foo", BAR: "bar"}
CONFIG = ConsumerMemberConfig(group_id="g", member_id="m", topics=("foo",), rack="r1")
SUB = Subscribed(topics=("foo",))
LINK = Link(coordinator_known=True, find_retry_ms=0, interval_ms=5_000, hb_next_ms=900, hb_last_ok_ms=0)


def _response(assignment: HeartbeatAssignment | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        error=E.NONE, member_epoch=3, heartbeat_interval_ms=0, assignment=assignment
    )


def test_a_join_heartbeat_is_full_and_owns_nothing() -> None:
    request, sent = heartbeat_request(CONFIG, SUB, IDS, Membership(epoch=0), tps("foo-0"))
    assert request.member_epoch == 0
    assert request.rack_id == "r1"
    assert request.subscribed_topic_names == ("foo",)
    assert request.topic_partitions == ()
    assert sent == Sent(topics=("foo",), assignors=(), owned=frozenset())


def test_a_heartbeat_sends_only_what_changed() -> None:
    owned = tps("foo-0", "foo-2")
    sent = Sent(topics=("foo",), assignors=(), owned=owned)
    request, _ = heartbeat_request(CONFIG, SUB, IDS, Membership(epoch=4, sent=sent), owned)
    assert (request.rack_id, request.subscribed_topic_names, request.topic_partitions) == (None, None, None)
    assert request.rebalance_timeout_ms == -1
    request, after = heartbeat_request(CONFIG, SUB, IDS, Membership(epoch=4, sent=sent), tps("foo-0"))
    assert request.topic_partitions == (TopicIdPartitions(topic_id=FOO, partitions=(0,)),)
    assert after.owned == tps("foo-0")


def test_owned_partitions_go_on_the_wire_by_topic_id_sorted() -> None:
    wire = owned_wire(tps("foo-2", "foo-0", "bar-1", "gone-0"), IDS)
    assert wire == tuple(
        sorted(
            (
                TopicIdPartitions(topic_id=FOO, partitions=(0, 2)),
                TopicIdPartitions(topic_id=BAR, partitions=(1,)),
            ),
            key=lambda t: t.topic_id,
        )
    )


def test_the_leave_heartbeat_epoch_says_whether_the_member_comes_back() -> None:
    assert leave_request(CONFIG).member_epoch == LEAVE_GROUP_MEMBER_EPOCH
    static = ConsumerMemberConfig(group_id="g", member_id="m", topics=("foo",), group_instance_id="i")
    assert leave_request(static).member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH


def test_next_pending_reads_the_heartbeat_answer() -> None:
    kept = Target(epoch=2, partitions=())
    assignment = HeartbeatAssignment(topic_partitions=(TopicIdPartitions(topic_id=FOO, partitions=(1,)),))
    assert next_pending(S.JOINING, 0, _response(assignment), None) is None  # no epoch yet
    got = next_pending(S.STABLE, 3, _response(assignment), kept)
    assert got is not None
    assert got.epoch == 3
    assert got.partitions == assignment.topic_partitions
    assert next_pending(S.JOINING, 3, _response(), None) == Target(epoch=3, partitions=())
    assert next_pending(S.STABLE, 3, _response(), kept) is kept


def test_resolve_counts_partitions_of_unknown_topic_ids() -> None:
    unknown = uuid.uuid5(uuid.NAMESPACE_OID, "unknown")
    target = Target(
        epoch=1,
        partitions=(
            TopicIdPartitions(topic_id=FOO, partitions=(0, 1)),
            TopicIdPartitions(topic_id=unknown, partitions=(0, 1, 2)),
        ),
    )
    assert resolve(target, NAMES) == (tps("foo-0", "foo-1"), 3)


def test_dropped_requests_leave_no_commit_or_job_and_an_owed_ack_due() -> None:
    # The commit and the assignment job are owned by the machine's CommitGate and
    # AssignmentJob; the round keeps the acknowledgement.
    kernel: Kernel[S, Api, Request, SendRequest] = Kernel(TABLE, S.STABLE, SendRequest, {})
    gate = CommitGate(kernel, Api.OFFSET_COMMIT)
    gate.open(Purpose.RECONCILE, tps("foo-0"), 0, 9)
    gate.commit(9, 1)
    job = AssignmentJob(CONFIG, kernel)
    job.start(1, 0)
    assert gate.gate is not None
    assert gate.gate.commit_id is not None
    assert job.computing
    gate.dropped()
    job.dropped()
    after = dropped(Round(ack_rid=8))
    assert gate.gate is not None
    assert gate.gate.commit_id is None
    assert (job.computing, after.ack_rid) == (False, 0)
    assert dropped(Round()).ack_rid is None


@pytest.mark.parametrize(
    ("codes", "verdict"),
    [
        ((E.NONE,), Commit.DONE),
        ((E.UNKNOWN_MEMBER_ID, E.NOT_COORDINATOR), Commit.UNKNOWN_MEMBER),
        ((E.NOT_COORDINATOR, E.REQUEST_TIMED_OUT), Commit.COORDINATOR),
        ((E.REQUEST_TIMED_OUT, E.UNSTABLE_OFFSET_COMMIT), Commit.RETRY),
        ((E.STALE_MEMBER_EPOCH,), Commit.STALE),
        ((E.STALE_MEMBER_EPOCH, E.REQUEST_TIMED_OUT), Commit.STALE),
        ((E.STALE_MEMBER_EPOCH, E.OFFSET_METADATA_TOO_LARGE), Commit.GIVE_UP),
        ((E.OFFSET_METADATA_TOO_LARGE,), Commit.GIVE_UP),
    ],
)
def test_commit_verdict(codes: tuple[E, ...], verdict: Commit) -> None:
    resp = OffsetCommitResponse(errors=tuple((tp("foo", i), c) for i, c in enumerate(codes)))
    assert commit_verdict(resp)[0] is verdict


def test_enforce_rebalance_steps_each_reason_and_wraps_at_the_int8_limit() -> None:
    assert bumped_reasons({"a": 0, "b": 127}) == {"a": 1, "b": 1}


def test_assignor_metadata_must_name_a_known_assignor_with_ordered_versions() -> None:
    good = AssignorMetadata(minimum_version=0, maximum_version=1, metadata_version=1, metadata_bytes=b"")
    check_assignor_metadata({"x": good}, "x", good)
    with pytest.raises(LocalProtocolError):
        check_assignor_metadata({"x": good}, "y", good)
    bad = AssignorMetadata(minimum_version=2, maximum_version=1, metadata_version=1, metadata_bytes=b"")
    with pytest.raises(LocalProtocolError):
        check_assignor_metadata({"x": good}, "x", bad)


def test_next_deadline() -> None:
    kw = {"membership": Membership(epoch=2), "ownership": Ownership(), "link": LINK}
    assert next_deadline(S.UNSUBSCRIBED, CONFIG, round_=Round(), requests=Requests(), **kw) is None  # type: ignore[arg-type]
    assert next_deadline(S.STABLE, CONFIG, round_=Round(), requests=Requests(), **kw) == 900  # type: ignore[arg-type]
    owed = Round(ack_rid=0)  # an acknowledgement is due at once
    assert next_deadline(S.ACKNOWLEDGING, CONFIG, round_=owed, requests=Requests(), **kw) == 0  # type: ignore[arg-type]
    inflight: Requests[Api] = Requests(
        next_id=1, inflight={1: InFlight(api=Api.HEARTBEAT, deadline_ms=700, generation=2)}
    )
    assert next_deadline(S.STABLE, CONFIG, round_=Round(), requests=inflight, **kw) == 700  # type: ignore[arg-type]
