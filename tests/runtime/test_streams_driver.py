"""The streams-group driver's task callbacks: what the consumer (its host) is told, in order,
for ASSIGNED, REVOKED and LOST (no broker: a revoke with nothing processed commits nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from streamtasks.errors import BrokerError
from streamtasks.membership.classic import AssignmentChanged, ErrorReported, InvokeListener, ListenerKind
from streamtasks.membership.streams import (
    CreateInternalTopics,
    EndpointsChanged,
    InvokeTasksListener,
    ShutdownApplication,
    StreamsMember,
    StreamsMemberConfig,
    TaskOffsetsUpdated,
    TasksListenerCompleted,
    TasksListenerKind,
)
from streamtasks.protocol.streams_group import (
    Endpoint,
    EndpointToPartitions,
    Subtopology,
    TaskOffset,
    TopicInfo,
    TopicPartitions,
    Topology,
)
from streamtasks.protocol.userdata import decode_assignment_info
from streamtasks.runtime.connection import GroupCoordinatorClient
from streamtasks.runtime.group_member import open_bootstrap
from streamtasks.runtime.security import ClientSettings
from streamtasks.runtime.streams_driver import StreamsGroupDriver
from tests.runtime.test_consumer_driver import _api_versions_server
from topology.ids import TaskId, TopicPartition

TOPOLOGY = Topology(
    epoch=0,
    subtopologies=(
        Subtopology(subtopology_id="0", source_topics=("lines",)),
        Subtopology(subtopology_id="1", repartition_source_topics=(TopicInfo(name="re"),)),
    ),
)
OFFSETS = TaskOffsetsUpdated(
    task_offsets=(TaskOffset(subtopology_id="1", partition=0, offset=3),), task_end_offsets=()
)

ENDPOINTS = EndpointsChanged(
    epoch=2,
    endpoints=(
        EndpointToPartitions(
            user_endpoint=Endpoint(host="h", port=1),
            active_partitions=(TopicPartitions(topic="lines", partitions=(0,)),),
            standby_partitions=(),
        ),
    ),
)


class Host:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def positions(self) -> Mapping[TopicPartition, int]:
        return {}

    def commit_metadata(self) -> Mapping[TopicPartition, str]:
        return {}

    async def assignment_changed(self, change: AssignmentChanged) -> None:
        self.calls.append(change)

    async def invoke_listener(self, call: InvokeListener) -> None:
        self.calls.append(call)

    async def before_commit(self, partitions: tuple[TopicPartition, ...]) -> None:
        self.calls.append(("before_commit", partitions))

    def error_reported(self, error: ErrorReported) -> None:
        self.calls.append(error)

    async def partition_counts(self, topics: tuple[str, ...]) -> Mapping[str, int]:
        return {}

    def streams_task_offsets(self) -> TaskOffsetsUpdated | None:
        return OFFSETS

    async def streams_create_topics(self, topics: tuple[TopicInfo, ...]) -> None:
        self.calls.append(("create", topics))

    def streams_shutdown(self, detail: str) -> None:
        self.calls.append(("shutdown", detail))

    def streams_endpoints(self, change: EndpointsChanged) -> None:
        self.calls.append(change)


def call(invocation: int, kind: TasksListenerKind, **tasks: Any) -> InvokeTasksListener:
    return InvokeTasksListener(invocation_id=invocation, kind=kind, member_epoch=4, **tasks)


def test_assign_revoke_and_lose_reach_the_consumer_as_partitions() -> None:
    async def run() -> tuple[Host, StreamsGroupDriver]:
        host = Host()
        member = StreamsMember(
            StreamsMemberConfig(group_id="g", member_id="m", process_id="p", topology=TOPOLOGY)
        )
        driver = StreamsGroupDriver(member, GroupCoordinatorClient("127.0.0.1:1", "g"), host)
        await driver._execute(
            [call(1, TasksListenerKind.ASSIGNED, active=(("0", 0), ("1", 0)), standby=(("1", 1),))]
        )
        await driver._execute([call(2, TasksListenerKind.REVOKED, active=(("0", 0),))])
        await driver._execute([call(3, TasksListenerKind.LOST)])
        return host, driver

    host, driver = asyncio.run(run())
    lines, re0 = TopicPartition("lines", 0), TopicPartition("re", 0)
    assigned, listener_assigned, before, revoked, listener_revoked, lost, listener_lost = host.calls
    assert isinstance(assigned, AssignmentChanged)
    assert (assigned.owned, assigned.added, assigned.removed, assigned.generation) == (
        (lines, re0),
        (lines, re0),
        (),
        4,
    )
    info = decode_assignment_info(assigned.user_data)
    assert info.active_tasks == {TaskId(0, 0), TaskId(1, 0)}
    assert info.standby_tasks == {TaskId(1, 1)}
    assert listener_assigned.kind is ListenerKind.ASSIGNED
    assert listener_assigned.partitions == (lines, re0)
    assert before == ("before_commit", (lines,))  # flushed before the (empty) commit
    assert (revoked.owned, revoked.removed, revoked.lost) == ((re0,), (lines,), ())
    assert listener_revoked.kind is ListenerKind.REVOKED
    assert listener_revoked.partitions == (lines,)
    assert (lost.owned, lost.removed, lost.lost, lost.user_data) == ((), (re0,), (re0,), b"")
    assert listener_lost.kind is ListenerKind.LOST
    # Each callback was answered, in order (the join came first).
    queued = []
    while not driver._events.empty():
        queued.append(driver._events.get_nowait())
    answers = [e.invocation_id for e in queued if isinstance(e, TasksListenerCompleted)]
    assert answers == [1, 2, 3]
    assert not any(e.failed for e in queued if isinstance(e, TasksListenerCompleted))


def test_task_offsets_are_posted_every_interval_and_statuses_and_endpoints_reach_the_host() -> None:
    async def run() -> tuple[Host, list[Any], list[Any], list[Any]]:
        host = Host()
        member = StreamsMember(
            StreamsMemberConfig(group_id="g", member_id="m", process_id="p", topology=TOPOLOGY)
        )
        driver = StreamsGroupDriver(
            member, GroupCoordinatorClient("127.0.0.1:1", "g"), host, offsets_interval_ms=1000
        )
        first, soon, later = driver.due_events(10_000), driver.due_events(10_500), driver.due_events(11_000)
        await driver._execute(
            [
                CreateInternalTopics(topics=(TopicInfo(name="x"),), detail="d"),
                ShutdownApplication(detail="bye"),
                ENDPOINTS,
            ]
        )
        return host, first, soon, later

    host, first, soon, later = asyncio.run(run())
    assert first == [OFFSETS]
    assert soon == []
    assert later == [OFFSETS]
    assert host.calls == [("create", (TopicInfo(name="x"),)), ("shutdown", "bye"), ENDPOINTS]


def test_a_cluster_without_streams_group_heartbeat_is_refused_before_joining() -> None:
    async def run() -> str:
        server = await asyncio.start_server(_api_versions_server(None), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        member = StreamsMember(
            StreamsMemberConfig(group_id="g", member_id="m", process_id="p", topology=TOPOLOGY)
        )
        try:
            conn = await open_bootstrap(member, ClientSettings.of(f"127.0.0.1:{port}"), "t", 5.0)
        except BrokerError as exc:
            return str(exc)
        finally:
            server.close()
        await conn.close()
        return "opened"

    said = asyncio.run(run())
    assert "does not serve StreamsGroupHeartbeat (API key 88, v1 needed)" in said
    assert "group_protocol='classic'" in said
