"""The streams-group side of a simulated world: the real streams coordinator
(:mod:`streamtasks.coordinator.streams`) and the real sans-IO streams members
(:mod:`streamtasks.membership.streams`), with fail-over by replaying the coordinator's records.

``streams``: the coordinator with the ``sticky`` task assignor, as Apache Kafka's broker
places tasks (no warm-ups); ``streams-client``: streamtasks' ``high_availability`` assignor
with KIP-441 warm-ups and the hand-over at the probing rebalance. The topology has one
stateful subtopology per topic of the scenario (its changelog created when a member reports
MISSING_INTERNAL_TOPICS). :func:`streams_world` makes a :class:`~streamtasks.sim.world.World`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamtasks.coordinator import MetadataImage, TopicMetadata
from streamtasks.coordinator.streams import (
    StreamsCoordinatorConfig,
    StreamsGroupCoordinator,
    StreamsGroupState,
    StreamsRecord,
    StreamsResult,
)
from streamtasks.membership.classic import AssignmentChanged
from streamtasks.membership.streams import StreamsMemberConfig
from streamtasks.membership.streams.records import Task
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    Subtopology,
    TopicInfo,
    Topology,
)
from streamtasks.sim.host import Alarm, MemberHost, describe_fields
from streamtasks.sim.items import CoordinatorWake, FailoverEnd, Item, ToCoordinator
from streamtasks.sim.scenario import Scenario, Step
from streamtasks.sim.streams.checks import StreamsChecks
from streamtasks.sim.streams.process import LocalState, StreamsProcess
from streamtasks.sim.world import GroupSettings, RunFigures, World
from topology.ids import TopicPartition

__all__ = ["MODES", "StreamsRunResult", "StreamsSettings", "StreamsSide", "streams_world"]

#: ``--protocol`` name -> the coordinator's task assignor.
MODES = {"streams": "sticky", "streams-client": "high_availability"}


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsSettings(GroupSettings):
    rebalance_timeout_ms: int = 15_000
    acceptable_recovery_lag: int = 100
    task_offset_interval_ms: int = 2_000
    #: The runtime gives up on an answer after this long (the member then looks the
    #: coordinator up and heartbeats again).
    request_timeout_ms: int = 3_000
    #: Apache Kafka 4.4's ``group.streams.initial.rebalance.delay.ms`` and
    #: ``group.streams.assignment.interval.ms`` defaults, for both modes (0 and 0: a target at
    #: every epoch bump, as before these were modelled).
    initial_rebalance_delay_ms: int = 3_000
    assignment_interval_ms: int = 1_000


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsRunResult(RunFigures):
    mode: str
    group_epochs: int
    failovers: int
    #: Tasks that became active on a process, and of those the ones it had warmed up.
    took_over: int
    took_over_warm: int
    internal_topics_created: int


def changelog(topic: str) -> str:
    return f"{topic}-store-changelog"


def topology_of(topics: Sequence[tuple[str, int]]) -> Topology:
    return Topology(
        epoch=1,
        subtopologies=tuple(
            Subtopology(
                subtopology_id=str(i),
                source_topics=(name,),
                state_changelog_topics=(TopicInfo(name=changelog(name)),),
            )
            for i, (name, _) in enumerate(sorted(topics))
        ),
    )


def streams_world(
    scenario: Scenario, mode: str, settings: StreamsSettings | None = None
) -> World[StreamsProcess, StreamsRunResult]:
    chosen = settings or StreamsSettings()
    return World(scenario, chosen, lambda host: StreamsSide(host, mode, chosen))


class StreamsSide:
    """The streams coordinator of one world, its log and fail-overs, and the world's checks."""

    epoch_word = "epoch"
    replaces_zombies = True

    def __init__(self, host: MemberHost[StreamsProcess], mode: str, settings: StreamsSettings) -> None:
        self.host = host
        host.duplicate_is_retry = True  # a request reaches Kafka twice only as a retry
        self.mode = mode
        self.settings = settings
        self.scenario = host.scenario
        self.topology = topology_of(self.scenario.topics)
        self.sources = {s.subtopology_id: s.source_topics[0] for s in self.topology.subtopologies}
        self.created: set[str] = set()
        self.config = StreamsCoordinatorConfig(
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            assignor=MODES[mode],
            num_standby_replicas=settings.standby_replicas,
            acceptable_recovery_lag=settings.acceptable_recovery_lag,
            probing_rebalance_interval_ms=60_000,
            task_offset_interval_ms=settings.task_offset_interval_ms,
            initial_rebalance_delay_ms=settings.initial_rebalance_delay_ms,
            assignment_interval_ms=settings.assignment_interval_ms,
        )
        self.coordinator = StreamsGroupCoordinator(self.config, image=self._image())
        self.log: list[StreamsRecord] = []
        self.unavailable_until: int | None = None
        self.failovers = 0
        self.states: dict[str, LocalState] = {}
        self.checks = StreamsChecks(host, settings.group_id)
        host.watch_liveness(self.checks.touched)
        self._tasks: tuple[tuple[tuple[str, int], ...], frozenset[Task]] = ((), frozenset())
        self.alarm = Alarm(host.sched)

    @property
    def now(self) -> int:
        return self.host.now

    @property
    def available(self) -> bool:
        return self.unavailable_until is None

    def tasks(self) -> frozenset[Task]:
        """Every task of the topology on the topics as they are (built again when they grow)."""
        counts = self.host.counts
        seen = tuple(counts.items())
        if seen != self._tasks[0]:
            tasks = frozenset(
                (s, p) for s, topic in self.sources.items() for p in range(counts.get(topic, 0))
            )
            self._tasks = (seen, tasks)
        return self._tasks[1]

    def end_offset(self, task: Task, now_ms: int) -> int:
        """Every task's changelog grows by one record per ``record_interval_ms``."""
        return now_ms // self.settings.record_interval_ms

    # -- the coordinator ----------------------------------------------------------------------

    def _image(self) -> MetadataImage:
        counts = dict(self.host.counts)
        for topic in list(counts):
            if changelog(topic) in self.created:
                counts[changelog(topic)] = counts[topic]
        return MetadataImage(
            tuple(
                TopicMetadata(topic_id=uuid.uuid5(uuid.NAMESPACE_OID, t), name=t, num_partitions=n)
                for t, n in sorted(counts.items())
            )
        )

    def _write(self, result: StreamsResult[Any]) -> Any:
        self.log += result.records
        response = self.coordinator.apply(result)
        self.checks.after_write(self.coordinator, result.records)
        return response

    def _rearm(self) -> None:
        self.alarm.set(self.coordinator.next_deadline_ms() if self.available else None)

    def serve(self, item: ToCoordinator) -> None:
        request = item.request
        self.host.trace.add(self.now, f"{item.conn} -> {self.describe(request)}")
        assert isinstance(request, StreamsGroupHeartbeatRequest)
        if not self.available:
            response = StreamsGroupHeartbeatResponse(
                error=KafkaErrorCode.NOT_COORDINATOR,
                member_id=request.member_id,
                member_epoch=0,
                heartbeat_interval_ms=0,
            )
        else:
            response = self._write(self.coordinator.heartbeat(request, self.now, client_id=item.conn))
        if not item.late:
            self.host.reply(item.conn, item.request_id, response)
        self._rearm()

    def on_item(self, item: Item) -> None:
        if isinstance(item, FailoverEnd):
            self._failover_end()
        elif isinstance(item, CoordinatorWake):
            self.alarm.fired()
            if self.available:
                for result in self.coordinator.poll(self.now):
                    self.log += result.records
                    self.checks.after_write(self.coordinator, result.records)
            self._rearm()

    def topic_grew(self, new: tuple[Any, ...]) -> None:
        self.coordinator.set_image(self._image())  # an operator grows the changelogs with it

    def fail_over(self, duration_ms: int) -> None:
        until = self.now + max(duration_ms, 1)
        if self.unavailable_until is None:
            self.failovers += 1
        self.unavailable_until = max(self.unavailable_until or 0, until)
        self.host.sched.schedule(until, FailoverEnd())
        self._rearm()

    def move(self, step: Step) -> None:
        self.fail_over(step.duration_ms or 1_000)

    def _failover_end(self) -> None:
        if self.unavailable_until is None or self.now < self.unavailable_until:
            return
        self.unavailable_until = None
        old = self.coordinator
        fresh = StreamsGroupCoordinator(self.config, image=self._image())
        fresh.load(list(self.log), self.now)
        self.checks.failover_loaded(old, fresh)
        self.coordinator = fresh
        self.host.trace.add(self.now, f"coordinator loaded {len(self.log)} records")
        self._rearm()

    # -- members --------------------------------------------------------------------------------

    def new_process(self, step: Step, static: bool, incarnation: int) -> StreamsProcess:
        name = step.member
        config = StreamsMemberConfig(
            group_id=self.settings.group_id,
            member_id=f"{name}-{incarnation}",
            process_id=name,
            topology=self.topology,
            instance_id=name if static else None,
            rebalance_timeout_ms=self.settings.rebalance_timeout_ms,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
            request_timeout_ms=self.settings.request_timeout_ms,
        )
        state = self.states.setdefault(name, LocalState())
        return StreamsProcess(
            name=name, incarnation=incarnation, config=config, state=state, end_offset=self.end_offset
        )

    def describe(self, message: object) -> str:
        name = type(message).__name__.replace("StreamsGroupHeartbeat", "SGH")
        attrs = (
            "error",
            "member_epoch",
            "active_tasks",
            "standby_tasks",
            "warmup_tasks",
            "shutdown_application",
        )
        fields = describe_fields(message, attrs)
        return f"{name}({' '.join(fields)})"

    def coordinator_up(self) -> bool:
        return self.available

    def metadata_for(self, proc: StreamsProcess) -> Sequence[object]:
        return []

    def start_offsets(self, parts: tuple[TopicPartition, ...]) -> dict[TopicPartition, int]:
        return {}

    def sent(self, proc: StreamsProcess, request_id: int, request: object) -> None:
        return None

    def assignment_changed(self, proc: StreamsProcess, action: AssignmentChanged) -> str | None:
        return None

    def after_actions(self, proc: StreamsProcess) -> None:
        if proc.create_requests:
            for request in proc.create_requests:
                self.created.update(t.name for t in request.topics)
            proc.create_requests.clear()
            self.coordinator.set_image(self._image())
        self.checks.touched(proc)
        self.checks.after_event(self.coordinator)

    # -- after every event, convergence, the result ----------------------------------------------

    def after_event(self) -> None:
        self.checks.after_event(self.coordinator)

    def converged(self) -> bool:
        """``not convergence_gaps()`` and no fault or pause under way; the checks' indexes
        answer first (after every event once the steps are over: no walk of the group)."""
        host = self.host
        if not self.available or host.network.faults_active(self.now):
            return False
        if not self.checks.converged(self.coordinator, self.tasks()):
            return False
        return not any(p.paused for p in host.live())

    def convergence_gaps(self) -> list[str]:
        if not self.available:
            return ["coordinator failing over"]
        return self.checks.gaps(self.coordinator, self.tasks())

    def result(self, world: World[StreamsProcess, Any]) -> StreamsRunResult:
        host = self.host
        group = self.coordinator.group(self.settings.group_id)
        procs = list(host.procs.values())
        state = self.coordinator.group_state(self.settings.group_id)
        return StreamsRunResult(
            **world.run_figures(),
            mode=self.mode,
            group_epochs=0 if group is None else group.epoch,
            revoked=0,
            assigned=0,
            lost=0,
            moved=0 if state is StreamsGroupState.DEAD else sum(p.took_over for p in procs),
            failovers=self.failovers,
            took_over=sum(p.took_over for p in procs),
            took_over_warm=sum(p.took_over_warm for p in procs),
            internal_topics_created=len(self.created),
        )
