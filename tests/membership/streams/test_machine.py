"""The streams-group member (KIP-1071), pure: injected time, no broker. Each test drives the
member through its events and checks the actions and the heartbeats it sends."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.common import (
    CoordinatorDiscovered,
    ErrorReported,
    FindCoordinator,
    Leave,
    RequestFailed,
)
from streamtasks.membership.streams import (
    CreateInternalTopics,
    InvokeTasksListener,
    JoinStreamsGroup,
    MemberState,
    RequestShutdown,
    ResponseReceived,
    SendRequest,
    ShutdownApplication,
    StreamsMember,
    StreamsMemberConfig,
    TaskOffsetsUpdated,
    TasksListenerCompleted,
    TasksListenerKind,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    StreamsGroupHeartbeatResponse,
    StreamsGroupStatus,
    StreamsStatus,
    Subtopology,
    TaskIds,
    TaskOffset,
    TopicInfo,
    Topology,
)

S = MemberState
TOPOLOGY = Topology(
    epoch=0,
    subtopologies=(
        Subtopology(
            subtopology_id="0",
            source_topics=("in",),
            state_changelog_topics=(TopicInfo(name="app-store-changelog"),),
            repartition_sink_topics=("app-rep",),
        ),
        Subtopology(
            subtopology_id="1",
            repartition_source_topics=(TopicInfo(name="app-rep", partitions=4),),
        ),
    ),
)
INTERVAL = 100


def config(**overrides: Any) -> StreamsMemberConfig:
    values: dict[str, Any] = {"group_id": "app", "member_id": "m1", "process_id": "p1", "topology": TOPOLOGY}
    values.update(overrides)
    return StreamsMemberConfig(**values)


def of_type(actions: list[Any], kind: type) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def one(actions: list[Any], kind: type) -> Any:
    (found,) = of_type(actions, kind)
    return found


def answer(
    epoch: int,
    active: tuple[TaskIds, ...] | None = None,
    *,
    standby: tuple[TaskIds, ...] | None = None,
    warmup: tuple[TaskIds, ...] | None = None,
    error: KafkaErrorCode = KafkaErrorCode.NONE,
    status: tuple[StreamsStatus, ...] = (),
    offsets_ms: int = 1000,
) -> StreamsGroupHeartbeatResponse:
    with_tasks = active is not None
    return StreamsGroupHeartbeatResponse(
        error=error,
        member_id="m1",
        member_epoch=epoch,
        heartbeat_interval_ms=INTERVAL,
        task_offset_interval_ms=offsets_ms,
        status=status,
        active_tasks=active,
        standby_tasks=standby if standby is not None else (() if with_tasks else None),
        warmup_tasks=warmup if warmup is not None else (() if with_tasks else None),
    )


def tasks(subtopology: str, *partitions: int) -> tuple[TaskIds, ...]:
    return (TaskIds(subtopology_id=subtopology, partitions=partitions),)


class Driver:
    """Feeds the member and keeps the heartbeat in flight."""

    def __init__(self, member: StreamsMember) -> None:
        self.m = member
        self.now = 0
        self.sent: list[SendRequest] = []

    def state(self) -> S:
        """The member's state, read anew (not narrowed by an earlier assertion)."""
        return self.m.state

    def feed(self, event: Any) -> list[Any]:
        out = self.m.handle(event, self.now)
        self.sent += of_type(out, SendRequest)
        return out

    def poll(self, at: int) -> list[Any]:
        self.now = at
        out = self.m.poll(at)
        self.sent += of_type(out, SendRequest)
        return out

    def respond(self, response: StreamsGroupHeartbeatResponse) -> list[Any]:
        return self.feed(ResponseReceived(request_id=self.sent[-1].request_id, response=response))

    def complete(self, listener: InvokeTasksListener) -> list[Any]:
        return self.feed(TasksListenerCompleted(invocation_id=listener.invocation_id))

    def join(self) -> list[Any]:
        lookup = one(self.feed(JoinStreamsGroup()), FindCoordinator)
        return self.feed(CoordinatorDiscovered(request_id=lookup.request_id))

    def stable_with(self, epoch: int, active: tuple[TaskIds, ...]) -> None:
        self.join()
        assigned = one(self.respond(answer(epoch, active)), InvokeTasksListener)
        self.complete(assigned)
        self.respond(answer(epoch))
        assert self.state() is S.STABLE


def test_join_declares_the_topology_and_everything_static_at_epoch_0() -> None:
    d = Driver(StreamsMember(config(instance_id="i1", rack_id="r1", rebalance_timeout_ms=9000)))
    assert d.state() is S.UNSUBSCRIBED
    request = one(d.join(), SendRequest).request
    assert d.state() is S.JOINING
    assert (request.member_epoch, request.member_id, request.process_id) == (0, "m1", "p1")
    assert request.topology == TOPOLOGY
    assert (request.instance_id, request.rack_id, request.rebalance_timeout_ms) == ("i1", "r1", 9000)
    assert (request.active_tasks, request.standby_tasks, request.warmup_tasks) == ((), (), ())
    assert request.client_tags == ()


def test_first_target_is_taken_then_acknowledged_then_stable() -> None:
    d = Driver(StreamsMember(config()))
    d.join()
    out = d.respond(answer(1, tasks("0", 0, 1), standby=tasks("1", 2), warmup=tasks("1", 3)))
    assert d.state() is S.RECONCILING
    assigned = one(out, InvokeTasksListener)
    assert assigned.kind is TasksListenerKind.ASSIGNED
    assert (assigned.active, assigned.standby, assigned.warmup) == (
        (("0", 0), ("0", 1)),
        (("1", 2),),
        (("1", 3),),
    )
    assert of_type(out, SendRequest) == []  # no acknowledgement before the runtime took them
    ack = one(d.complete(assigned), SendRequest).request
    assert d.state() is S.ACKNOWLEDGING
    assert (ack.member_epoch, ack.active_tasks, ack.standby_tasks, ack.warmup_tasks) == (
        1,
        tasks("0", 0, 1),
        tasks("1", 2),
        tasks("1", 3),
    )
    assert ack.topology is None
    assert ack.process_id is None
    assert ack.rebalance_timeout_ms == -1
    d.respond(answer(1))
    assert d.state() is S.STABLE
    steady = one(d.poll(INTERVAL), SendRequest).request
    assert steady.active_tasks is None
    assert steady.standby_tasks is None


def test_active_tasks_are_revoked_before_the_new_ones_are_assigned() -> None:
    d = Driver(StreamsMember(config()))
    d.stable_with(1, tasks("0", 0, 1))
    d.poll(INTERVAL)
    revoked = one(d.respond(answer(2, tasks("0", 1, 2))), InvokeTasksListener)
    assert (revoked.kind, revoked.active) == (TasksListenerKind.REVOKED, (("0", 0),))
    assert d.state() is S.RECONCILING
    assigned = one(d.complete(revoked), InvokeTasksListener)
    assert (assigned.kind, assigned.active) == (TasksListenerKind.ASSIGNED, (("0", 1), ("0", 2)))
    ack = one(d.complete(assigned), SendRequest).request
    assert ack.active_tasks == tasks("0", 1, 2)
    assert ack.member_epoch == 2


def test_a_standby_change_revokes_nothing() -> None:
    d = Driver(StreamsMember(config()))
    d.stable_with(1, tasks("0", 0))
    d.poll(INTERVAL)
    listener = one(d.respond(answer(2, tasks("0", 0), standby=tasks("0", 1))), InvokeTasksListener)
    assert listener.kind is TasksListenerKind.ASSIGNED
    assert listener.standby == (("0", 1),)


def test_task_offsets_go_out_every_task_offset_interval() -> None:
    d = Driver(StreamsMember(config()))
    d.stable_with(1, tasks("0", 0))
    offsets = (TaskOffset(subtopology_id="0", partition=0, offset=42),)
    ends = (TaskOffset(subtopology_id="0", partition=0, offset=50),)
    d.feed(TaskOffsetsUpdated(task_offsets=offsets, task_end_offsets=ends))
    first = one(d.poll(INTERVAL), SendRequest).request
    assert (first.task_offsets, first.task_end_offsets) == (offsets, ends)
    d.respond(answer(1, offsets_ms=1000))
    assert one(d.poll(2 * INTERVAL), SendRequest).request.task_offsets is None
    d.respond(answer(1, offsets_ms=1000))
    sent_at = [INTERVAL * k for k in range(3, 13)]
    with_offsets = []
    for at in sent_at:
        request = one(d.poll(at), SendRequest).request
        d.respond(answer(1, offsets_ms=1000))
        if request.task_offsets is not None:
            with_offsets.append(at)
    assert with_offsets == [1100]  # 1000 ms after the last report at 100


def test_missing_internal_topics_asks_the_runtime_to_create_them_once() -> None:
    d = Driver(StreamsMember(config()))
    d.join()
    status = (StreamsStatus(status_code=StreamsGroupStatus.MISSING_INTERNAL_TOPICS, status_detail="app-rep"),)
    out = d.respond(answer(1, (), status=status))
    create = one(out, CreateInternalTopics)
    assert [t.name for t in create.topics] == ["app-store-changelog", "app-rep"]
    assert create.detail == "app-rep"
    d.complete(one(out, InvokeTasksListener))
    assert of_type(d.respond(answer(1, status=status)), CreateInternalTopics) == []  # not again
    d.poll(INTERVAL)
    d.respond(answer(1))
    d.poll(2 * INTERVAL)
    assert len(of_type(d.respond(answer(1, status=status)), CreateInternalTopics)) == 1  # it came back


@pytest.mark.parametrize(
    "code",
    [
        StreamsGroupStatus.MISSING_SOURCE_TOPICS,
        StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS,
        StreamsGroupStatus.STALE_TOPOLOGY,
        StreamsGroupStatus.ASSIGNMENT_DELAYED,
        StreamsGroupStatus.MISSING_CLIENT_TAGS,
    ],
)
def test_other_statuses_are_reported_and_waited_out(code: StreamsGroupStatus) -> None:
    d = Driver(StreamsMember(config()))
    d.join()
    out = d.respond(answer(1, (), status=(StreamsStatus(status_code=code, status_detail="in"),)))
    report = one(out, ErrorReported)
    assert code.name in report.reason
    assert "in" in report.reason
    assert not report.fatal
    assert d.state() is S.RECONCILING  # with an empty target, as the broker gives one


def test_shutdown_application_both_ways() -> None:
    d = Driver(StreamsMember(config()))
    d.stable_with(1, tasks("0", 0))
    # sent at once, not at the next interval
    assert one(d.feed(RequestShutdown(reason="uncaught")), SendRequest).request.shutdown_application is True
    status = (StreamsStatus(status_code=StreamsGroupStatus.SHUTDOWN_APPLICATION, status_detail="m2 asked"),)
    assert one(d.respond(answer(1, status=status)), ShutdownApplication).detail == "m2 asked"


@pytest.mark.parametrize("error", [KafkaErrorCode.FENCED_MEMBER_EPOCH, KafkaErrorCode.UNKNOWN_MEMBER_ID])
def test_fenced_tasks_are_lost_then_it_rejoins_at_epoch_0(error: KafkaErrorCode) -> None:
    d = Driver(StreamsMember(config()))
    d.stable_with(3, tasks("0", 0, 1))
    d.poll(INTERVAL)
    out = d.respond(answer(3, error=error))
    lost = one(out, InvokeTasksListener)
    assert (lost.kind, lost.active) == (TasksListenerKind.LOST, (("0", 0), ("0", 1)))
    assert d.state() is S.FENCED
    assert one(out, ErrorReported).code is error
    rejoin = one(d.complete(lost), SendRequest).request
    assert d.state() is S.JOINING
    assert (rejoin.member_epoch, rejoin.member_id, rejoin.topology) == (0, "m1", TOPOLOGY)
    assert rejoin.active_tasks == ()


@pytest.mark.parametrize(("instance_id", "epoch"), [(None, -1), ("i1", -2)])
def test_leave_revokes_active_tasks_then_sends_the_leave_heartbeat(
    instance_id: str | None, epoch: int
) -> None:
    d = Driver(StreamsMember(config(instance_id=instance_id)))
    d.stable_with(2, tasks("0", 0))
    revoked = one(d.feed(Leave()), InvokeTasksListener)
    assert (revoked.kind, revoked.active) == (TasksListenerKind.REVOKED, (("0", 0),))
    assert d.state() is S.PREPARE_LEAVING
    leave = one(d.complete(revoked), SendRequest).request
    assert (leave.member_epoch, leave.instance_id) == (epoch, instance_id)
    assert d.state() is S.LEAVING
    d.respond(answer(epoch))
    assert d.state() is S.UNSUBSCRIBED
    assert d.m.owned.empty


def test_fatal_errors_stop_the_member() -> None:
    d = Driver(StreamsMember(config()))
    d.join()
    out = d.respond(answer(0, error=KafkaErrorCode.STREAMS_INVALID_TOPOLOGY))
    assert one(out, ErrorReported).fatal
    assert d.state() is S.FATAL
    assert d.m.poll(10_000) == []


def test_a_group_of_another_type_stops_the_member_saying_the_migration_is_offline() -> None:
    d = Driver(StreamsMember(config()))
    d.join()
    message = "Group g is not a streams group."
    response = dataclasses.replace(answer(0, error=KafkaErrorCode.GROUP_ID_NOT_FOUND), error_message=message)
    out = d.respond(response)
    report = one(out, ErrorReported)
    assert report.fatal
    assert message in report.reason
    assert "only an empty classic group" in report.reason
    assert d.state() is S.FATAL
    assert d.m.poll(10_000) == []  # no retries


def test_coordinator_errors_and_failures_look_it_up_again_with_backoff() -> None:
    d = Driver(StreamsMember(config(retry_backoff_ms=100)))
    d.stable_with(1, tasks("0", 0))
    d.poll(INTERVAL)
    lookup = one(d.respond(answer(1, error=KafkaErrorCode.NOT_COORDINATOR)), FindCoordinator)
    assert d.state() is S.STABLE  # tasks kept
    assert d.feed(RequestFailed(request_id=lookup.request_id)) == []
    assert d.m.next_deadline_ms() == INTERVAL + 100
    again = one(d.poll(INTERVAL + 100), FindCoordinator)
    beat = one(d.feed(CoordinatorDiscovered(request_id=again.request_id)), SendRequest)
    assert beat.request.member_epoch == 1


def test_illegal_events_are_refused() -> None:
    d = Driver(StreamsMember(config()))
    d.join()
    with pytest.raises(LocalProtocolError, match="JoinStreamsGroup is not allowed in state JOINING"):
        d.feed(JoinStreamsGroup())
    with pytest.raises(LocalProtocolError, match="unknown invocation"):
        d.feed(TasksListenerCompleted(invocation_id=9))


def test_a_target_that_changes_mid_reconciliation_is_reconciled_next() -> None:
    d = Driver(StreamsMember(config()))
    d.stable_with(1, tasks("0", 0, 1, 2))
    d.poll(INTERVAL)
    revoked = one(d.respond(answer(2, tasks("0", 1, 2))), InvokeTasksListener)
    assert revoked.active == (("0", 0),)
    d.poll(2 * INTERVAL)  # a heartbeat during the revocation brings a newer target
    assert of_type(d.respond(answer(3, tasks("0", 2))), InvokeTasksListener) == []
    more = one(d.complete(revoked), InvokeTasksListener)
    assert (more.kind, more.active) == (TasksListenerKind.REVOKED, (("0", 1),))  # the newer one drops 1 too
    assigned = one(d.complete(more), InvokeTasksListener)
    assert (assigned.kind, assigned.active) == (TasksListenerKind.ASSIGNED, (("0", 2),))
    ack = one(d.complete(assigned), SendRequest).request
    assert (ack.member_epoch, ack.active_tasks) == (3, tasks("0", 2))
    d.respond(answer(3))
    assert d.state() is S.STABLE


def test_a_target_that_arrives_after_the_assignment_callback_started_waits_for_the_ack() -> None:
    d = Driver(StreamsMember(config()))
    d.join()
    first = one(d.respond(answer(1, tasks("0", 0, 1))), InvokeTasksListener)
    d.poll(INTERVAL)
    d.respond(answer(2, tasks("0", 0)))  # newer target while the first is being taken
    ack = one(d.complete(first), SendRequest).request
    assert ack.active_tasks == tasks("0", 0, 1)  # what the runtime took, not the newer target
    revoked = one(d.respond(answer(2)), InvokeTasksListener)
    assert (revoked.kind, revoked.active) == (TasksListenerKind.REVOKED, (("0", 1),))


def test_a_failed_heartbeat_makes_the_next_one_report_the_tasks_again() -> None:
    """The answer to the heartbeat may have carried new tasks and been lost: the next heartbeat
    reports what the member owns, so the coordinator sees the difference and answers again
    (Kafka's client resets its sent fields on a failure; the simulator found the gap)."""
    d = Driver(StreamsMember(config()))
    d.stable_with(1, tasks("0", 0, 1))
    d.poll(INTERVAL)
    d.feed(RequestFailed(request_id=d.sent[-1].request_id))
    again = one(d.poll(INTERVAL + 1_000), SendRequest).request
    assert again.active_tasks == tasks("0", 0, 1)
    assert (again.standby_tasks, again.warmup_tasks) == ((), ())
    d.respond(answer(1))
    steady = one(d.poll(2 * INTERVAL + 2_000), SendRequest).request
    assert steady.active_tasks is None


def test_an_error_answer_makes_the_next_heartbeat_report_the_tasks_again() -> None:
    """Kafka's client resets its sent fields on every error answer too, not only on a failure:
    a retriable error (the coordinator still loading) is followed by a full heartbeat."""
    d = Driver(StreamsMember(config()))
    d.stable_with(1, tasks("0", 0, 1))
    d.poll(INTERVAL)
    d.respond(answer(1, error=KafkaErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
    again = one(d.poll(INTERVAL + 1_000), SendRequest).request
    assert again.active_tasks == tasks("0", 0, 1)
    assert (again.standby_tasks, again.warmup_tasks) == ((), ())
