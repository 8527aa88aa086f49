"""Drive real :class:`ConsumerMember` objects against the real KIP-848 coordinator, without a
network: every request is answered at once (or held back, or dropped, when a test says so)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from assignors.partition.uniform import UniformAssignor
from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import AssignmentConfigs
from streamtasks.coordinator import CoordinatorConfig, GroupCoordinator, MetadataImage, Record, TopicMetadata
from streamtasks.membership.classic import (
    AssignmentChanged,
    CommitOffsets,
    CoordinatorDiscovered,
    ErrorReported,
    FindCoordinator,
    InvokeListener,
    ListenerKind,
    RequestFailed,
)
from streamtasks.membership.consumer import (
    Action,
    AssignorMetadata,
    ConsumerMember,
    ConsumerMemberConfig,
    Event,
    MetadataUpdated,
    ResponseReceived,
    SendRequest,
)
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupPrepareAssignmentRequest,
)
from streamtasks.protocol.classic_group import OffsetCommitResponse
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.userdata import LATEST_VERSION, MIN_SUPPORTED_VERSION
from streamtasks.streams import StreamsPartitionAssignor
from topology.ids import TaskId, TopicPartition
from topology.model import Topology

GROUP = "g"


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_OID, name)


@dataclass
class Node:
    """One member and everything its driver saw."""

    member: ConsumerMember
    actions: list[Action] = field(default_factory=list)
    listener: list[tuple[ListenerKind, tuple[TopicPartition, ...]]] = field(default_factory=list)
    errors: list[ErrorReported] = field(default_factory=list)
    sent: list[Any] = field(default_factory=list)
    #: Requests held back: (request id, request) — answered with ``release``.
    held: list[tuple[int, Any]] = field(default_factory=list)
    hold: bool = False
    #: Hold back only the offset commits.
    hold_commits: bool = False
    commits: list[CommitOffsets] = field(default_factory=list)


class Cluster:
    def __init__(
        self,
        topics: Mapping[str, int] | None = None,
        *,
        config: CoordinatorConfig | None = None,
        assignors: Mapping[str, Any] | None = None,
    ) -> None:
        self.topics = dict(topics or {"foo": 4})
        self.coordinator = GroupCoordinator(
            config
            or CoordinatorConfig(
                session_timeout_ms=10_000, heartbeat_interval_ms=1_000, server_assignors=("uniform",)
            ),
            assignors=assignors or {"uniform": UniformAssignor()},
            image=self.image(),
        )
        self.log: list[Record] = []
        self.now = 0
        self.nodes: dict[str, Node] = {}
        self.commit_error: KafkaErrorCode = KafkaErrorCode.NONE
        #: The coordinator's process is gone (``kill``): lookups and requests fail until ``restart``.
        self.down = False

    def image(self) -> MetadataImage:
        return MetadataImage(
            tuple(
                TopicMetadata(topic_id=topic_id(n), name=n, num_partitions=p) for n, p in self.topics.items()
            )
        )

    def metadata_event(self) -> MetadataUpdated:
        return MetadataUpdated(
            partitions_per_topic=dict(self.topics), topic_ids={n: topic_id(n) for n in self.topics}
        )

    def add(self, name: str, **config: Any) -> Node:
        config.setdefault("topics", tuple(self.topics))
        config.setdefault("session_timeout_ms", 10_000)
        config.setdefault("rebalance_timeout_ms", 15_000)
        config.setdefault("heartbeat_interval_ms", 1_000)
        config.setdefault("request_timeout_ms", 5_000)
        member = ConsumerMember(ConsumerMemberConfig(group_id=GROUP, member_id=name, **config), self.now)
        node = self.nodes[name] = Node(member)
        self.handle(name, self.metadata_event())
        return node

    # -- driving ---------------------------------------------------------------------------

    def handle(self, name: str, event: Event) -> list[Action]:
        node = self.nodes[name]
        actions = node.member.handle(event, self.now)
        self.execute(name, actions)
        return actions

    def poll(self, name: str) -> list[Action]:
        node = self.nodes[name]
        actions = node.member.poll(self.now)
        self.execute(name, actions)
        return actions

    def execute(self, name: str, actions: Iterable[Action]) -> None:
        node = self.nodes[name]
        for action in actions:
            node.actions.append(action)
            if self.down and isinstance(action, FindCoordinator | SendRequest | CommitOffsets):
                error = (
                    KafkaErrorCode.COORDINATOR_NOT_AVAILABLE
                    if isinstance(action, FindCoordinator)
                    else KafkaErrorCode.NETWORK_EXCEPTION
                )
                if isinstance(action, SendRequest):
                    node.sent.append(action.request)
                self.handle(name, RequestFailed(request_id=action.request_id, error=error))
            elif isinstance(action, FindCoordinator):
                self.handle(name, CoordinatorDiscovered(request_id=action.request_id))
            elif isinstance(action, SendRequest):
                node.sent.append(action.request)
                if node.hold:
                    node.held.append((action.request_id, action.request))
                else:
                    self.answer(name, action.request_id, action.request)
            elif isinstance(action, CommitOffsets):
                node.commits.append(action)
                response = OffsetCommitResponse(
                    errors=tuple((p, self.commit_error) for p in action.partitions)
                )
                if node.hold or node.hold_commits:
                    node.held.append((action.request_id, response))
                else:
                    self.handle(name, ResponseReceived(request_id=action.request_id, response=response))
            elif isinstance(action, InvokeListener):
                node.listener.append((action.kind, action.partitions))
            elif isinstance(action, ErrorReported):
                node.errors.append(action)
            else:
                assert isinstance(action, AssignmentChanged)

    def answer(self, name: str, request_id: int, request: Any) -> None:
        response = self.write(request)
        self.handle(name, ResponseReceived(request_id=request_id, response=response))

    def write(self, request: Any) -> Any:
        c = self.coordinator
        if isinstance(request, OffsetCommitResponse):
            return request
        if isinstance(request, ConsumerGroupHeartbeatRequest):
            result: Any = c.heartbeat(request, self.now)
        elif isinstance(request, ConsumerGroupPrepareAssignmentRequest):
            result = c.prepare_assignment(request, self.now)
        else:
            assert isinstance(request, ConsumerGroupInstallAssignmentRequest)
            result = c.install_assignment(request, self.now)
        self.log += result.records
        return c.apply(result)

    def release(self, name: str) -> None:
        node = self.nodes[name]
        held, node.held = node.held, []
        node.hold = node.hold_commits = False
        for rid, request in held:
            self.answer(name, rid, request)

    def kill(self) -> None:
        """The coordinator's process dies (kill -9): every request held in flight fails with
        NETWORK_EXCEPTION (its connection is gone), and so does everything until ``restart``."""
        self.down = True
        for name, node in self.nodes.items():
            held, node.held = node.held, []
            node.hold = node.hold_commits = False
            for rid, _ in held:
                self.handle(name, RequestFailed(request_id=rid, error=KafkaErrorCode.NETWORK_EXCEPTION))

    def restart(self) -> None:
        """A new coordinator process loads the groups from the log (as ``streamtasks
        coordinator`` does on start: sessions restart now) and answers from now on."""
        fresh = GroupCoordinator(
            self.coordinator.config, assignors=self.coordinator.assignors, image=self.image()
        )
        resumed = fresh.load(self.log, self.now)
        self.log += resumed.records
        fresh.apply(resumed)
        self.coordinator = fresh
        self.down = False

    def tick(self, ms: int = 0) -> None:
        """Advance the clock, run the coordinator's timers (unless it is down), poll every member."""
        self.now += ms
        for result in () if self.down else self.coordinator.poll(self.now):
            self.log += result.records
        for name in list(self.nodes):
            self.poll(name)

    def run(self, ms: int, step: int = 100) -> None:
        for _ in range(ms // step):
            self.tick(step)

    # -- reading ---------------------------------------------------------------------------

    def owned(self, name: str) -> frozenset[TopicPartition]:
        return self.nodes[name].member.owned_partitions

    def group(self) -> Any:
        return self.coordinator.group(GROUP)

    def assert_exclusive(self) -> None:
        seen: dict[TopicPartition, str] = {}
        for name, node in self.nodes.items():
            for p in node.member.owned_partitions:
                assert p not in seen, f"{p} owned by {seen[p]} and {name}"
                seen[p] = name


def streams_member(c: Cluster, name: str, topology: Topology, sums: dict[TaskId, int]) -> AssignorMetadata:
    """The streams assignor's metadata for process ``name`` with these task offset sums; adds
    the member (the assignor client-side, one standby per task) if it is not in ``c`` yet."""
    assignor = StreamsPartitionAssignor(
        topology,
        task_assignor=HighAvailabilityTaskAssignor(),
        configs=AssignmentConfigs(num_standby_replicas=1),
        end_offsets=dict,
        now_ms=lambda: c.now,
    )
    data = assignor.subscription_user_data(
        process_id=uuid.uuid5(uuid.NAMESPACE_OID, name), task_offset_sums=sums
    )
    metadata = AssignorMetadata(
        minimum_version=MIN_SUPPORTED_VERSION,
        maximum_version=LATEST_VERSION,
        metadata_version=LATEST_VERSION,
        metadata_bytes=data,
    )
    if name not in c.nodes:
        c.add(name, client_assignors=(assignor,), assignor_metadata={"streamtasks": metadata})
    return metadata
