"""The applications of simulated processes whose assignors take configuration (the App drills).

A scenario step names a plain consumer's assignors by name (``Step.assignors``: registry
assignors with zero-argument constructors). A step may instead carry an :data:`AppSpec`, a
frozen description of the process's application; each incarnation the world starts gets a
fresh :class:`SimApp` built from it (:func:`build_app`), whose assignors and topics its member
machine runs with and which sees every assignment the member applies:

* :class:`StreamsAppSpec` is a :class:`streamtasks.App`'s group member: the real
  :class:`~streamtasks.streams.StreamsPartitionAssignor` built as the App builds it
  (:func:`~streamtasks.streams.wiring.streams_wire`: ``upgrade_from`` and ``emulate_release``
  pin the rebalance protocol and the userdata versions; the ``high_availability`` task
  assignor), with ``upgrade_from="faust"`` faust's protocol first
  (:class:`~streamtasks.streams.faust_protocol.FaustProtocolAssignor`) and faust's topics. On an
  assignment it does what ``App.on_assignment`` does at the group level: a faust assignment is
  read as faust's, a streamtasks one with version probing, and when the version moves it asks
  for a rebalance (KIP-568) at once.
* :class:`FaustAppSpec` is a faust-streaming worker, **modelled**: a classic member offering
  only the ``"faust"`` protocol, whose leader step is streamtasks' implementation of faust's
  assignor (the same ``FaustProtocolAssignor`` a streamtasks member with
  ``upgrade_from="faust"`` leads with), reading its assignments as faust's. It is not
  faust-streaming's code.

The model is the assignment and ownership level: tasks are the topology's (one per source
partition per subtopology), there are no records and no state. Every changelog is empty (end
offset 0), so every process is caught up on every task: no warm-ups, no restores, no probing
rebalances. A process reports as running the tasks of the source partitions it owns when it
subscribes and as standbys (offset sum 0) the standby tasks of its last assignment.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import assignors as assignor_registry
from assignors.partition.hooks import MemberAssignment
from assignors.partition.types import PartitionAssignor
from assignors.types import AssignmentConfigs, TaskAssignor
from streamtasks.membership.classic import AssignmentChanged
from streamtasks.protocol.userdata import RUNNING_OFFSET_SUM
from streamtasks.streams import StreamsPartitionAssignor
from streamtasks.streams.assignment_reader import AssignmentReaders
from streamtasks.streams.faust_protocol import FaustProtocolAssignor, faust_topics
from streamtasks.streams.wiring import streams_assignor_type, streams_wire
from topology.ids import TaskId, TopicPartition
from topology.model import Topology

__all__ = [
    "FAUST",
    "STREAMS",
    "AppLog",
    "AppOutcome",
    "AppSpec",
    "FaustAppSpec",
    "GenerationApps",
    "SimApp",
    "StreamsAppSpec",
    "build_app",
]

#: The kinds of :class:`SimApp`.
STREAMS, FAUST = "streams", "faust"


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsAppSpec:
    """A streamtasks App member (module docstring); the fields are the App's settings."""

    topology: Topology
    upgrade_from: str | None = None
    emulate_release: str | None = None
    num_standby_replicas: int = 1
    task_assignor: str = "high_availability"

    def describe(self) -> str:
        pins = [f"upgrade_from={self.upgrade_from}"] if self.upgrade_from else []
        pins += [f"emulate_release={self.emulate_release}"] if self.emulate_release else []
        return f"App({', '.join(pins)})"


@dataclass(frozen=True, slots=True, kw_only=True)
class FaustAppSpec:
    """A faust-streaming worker, modelled (module docstring); ``standby_replicas``: faust's
    ``table_standby_replicas``."""

    topology: Topology
    standby_replicas: int = 1

    def describe(self) -> str:
        return "faust (model)"


AppSpec = StreamsAppSpec | FaustAppSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationApps:
    """One generation as the applications saw it: the protocol their assignments came under
    and the kinds of application that got one."""

    generation: int
    protocol: str
    kinds: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class AppOutcome:
    """A live process's application at the end of a run."""

    name: str
    kind: str
    #: The protocol of the group it is in (the coordinator's choice at its last JoinGroup).
    protocol: str | None
    #: Streams apps: the userdata version its next subscription is encoded at.
    userdata_version: int | None
    #: Streams apps: the userdata version of the last streamtasks assignment it read.
    assignment_version: int | None


class SimApp:
    """One incarnation's application (module docstring). The driver calls
    :meth:`on_assignment` for every ``AssignmentChanged`` its member emits."""

    def __init__(
        self,
        *,
        kind: str,
        topology: Topology,
        topics: tuple[str, ...],
        streams: StreamsPartitionAssignor | None,
        faust: FaustProtocolAssignor | None,
    ) -> None:
        self.kind = kind
        self.topology = topology
        self.topics = topics
        self.streams = streams
        self.faust = faust
        self.owned: tuple[TopicPartition, ...] = ()
        self.standbys: frozenset[TaskId] = frozenset()
        self.assignment_version: int | None = None
        #: What went wrong that the live App (or faust) would log as an error, in order.
        self.problems: list[str] = []
        #: Rebalances it asked for because version probing moved its subscription version.
        self.version_rejoins = 0

    @property
    def assignors(self) -> tuple[PartitionAssignor, ...]:
        """The member's assignors, most preferred first."""
        return tuple(a for a in (self.faust, self.streams) if a is not None)

    @property
    def readers(self) -> AssignmentReaders:
        """Who reads an assignment: the assignor of the protocol it came under (KIP-848:
        streams). Built from the assignors at the time of asking: :func:`build_app` sets
        :attr:`streams` after the app exists (the assignor reads the app's offset sums)."""
        return AssignmentReaders(
            (a for a in (self.faust, self.streams) if a is not None), client_side=self.streams
        )

    @property
    def userdata_version(self) -> int | None:
        return None if self.streams is None else self.streams.used_version

    def task_offset_sums(self) -> dict[TaskId, int]:
        """Running actives (the source partitions owned now) and the last standbys, caught up."""
        sums = dict.fromkeys(self.standbys, 0)
        for tp in self.owned:
            if tp.topic in self.topology.source_topics:
                sums[self.topology.task_for(tp)] = RUNNING_OFFSET_SUM
        return dict(sorted(sums.items()))

    def on_assignment(self, change: AssignmentChanged, protocol: str | None) -> str | None:
        """Apply ``change`` (under ``protocol``); returns why to rejoin now (version probing),
        or None."""
        self.owned = change.owned
        read = self.readers.read(
            protocol,
            MemberAssignment(
                partitions=change.owned, user_data=change.user_data, generation=change.generation
            ),
            follow_version=True,
        )
        if read is None:
            if change.user_data:
                self.problems.append(
                    f"generation {change.generation}: a {protocol!r} assignment for {self.kind}"
                )
            return None
        if read.error is not None:
            self.problems.append(f"generation {change.generation}: {read.error}")
        if change.user_data:
            if read.versioned:
                self.assignment_version = read.info.version
            self.standbys = read.info.standby_tasks
        if not read.rejoin or read.version is None:
            return None
        self.version_rejoins += 1
        return (
            f"version probing: sent userdata v{read.sent_version}, got a v{read.info.version} assignment, "
            f"the group speaks v{read.info.latest_supported_version}; rejoining with "
            f"v{read.version.new_used_version}"
        )

    def outcome(self, name: str, protocol: str | None) -> AppOutcome:
        return AppOutcome(
            name=name,
            kind=self.kind,
            protocol=protocol,
            userdata_version=self.userdata_version,
            assignment_version=self.assignment_version,
        )


def build_app(
    spec: AppSpec,
    *,
    name: str,
    incarnation: int,
    partitions_per_topic: Mapping[str, int],
    now_ms: Callable[[], int],
) -> SimApp:
    """A fresh application for incarnation ``incarnation`` of process ``name``: its process id
    is the name's (kept across incarnations, as the App keeps it in its state directory)."""
    topology = spec.topology
    sources = {t: n for t, n in partitions_per_topic.items() if t in topology.source_topics}
    ends = {tp: 0 for task in topology.tasks(sources) for tp in task.changelog_partitions}
    url = f"sim://{name}-{incarnation}/"
    if isinstance(spec, FaustAppSpec):
        faust = FaustProtocolAssignor(topology, url=url, replicas=spec.standby_replicas)
        return SimApp(kind=FAUST, topology=topology, topics=faust_topics(topology), streams=None, faust=faust)
    wire = streams_wire(spec.upgrade_from, spec.emulate_release)
    with_faust = (
        FaustProtocolAssignor(topology, url=url, replicas=spec.num_standby_replicas)
        if wire.advertise_faust
        else None
    )
    app = SimApp(
        kind=STREAMS,
        topology=topology,
        topics=faust_topics(topology) if with_faust is not None else topology.subscribed_topics(),
        streams=None,
        faust=with_faust,
    )
    process_id = uuid.uuid5(uuid.NAMESPACE_URL, f"sim://{name}")
    app.streams = streams_assignor_type(wire.protocol)(
        topology,
        task_assignor=_task_assignor(spec.task_assignor),
        configs=AssignmentConfigs(num_standby_replicas=spec.num_standby_replicas),
        end_offsets=lambda: ends,
        now_ms=now_ms,
        process_id=lambda: process_id,
        task_offset_sums=app.task_offset_sums,
        metadata_version=wire.metadata_version,
        latest_version=wire.latest_version,
    )
    return app


_TASK_ASSIGNOR_TYPES: dict[str, type[TaskAssignor]] = {}


def _task_assignor(name: str) -> TaskAssignor:
    """A fresh task assignor; the registry lookup (an entry-point scan, ~40 ms) is done once per
    name, not once per simulated process start."""
    kind = _TASK_ASSIGNOR_TYPES.get(name)
    if kind is None:
        found = assignor_registry.get(name)
        _TASK_ASSIGNOR_TYPES[name] = type(found)
        return found
    return kind()


@dataclass(slots=True)
class AppLog:
    """Per generation, the protocol the applications' assignments came under and the kinds of
    application that got one (:class:`GenerationApps`)."""

    generations: dict[int, tuple[str, set[str]]] = field(default_factory=dict)

    def assigned(self, generation: int, protocol: str | None, kind: str) -> None:
        if generation < 0 or protocol is None:
            return
        seen = self.generations.setdefault(generation, (protocol, set()))
        seen[1].add(kind)
        if protocol not in seen[0].split("+"):  # two protocols in one generation: keep both visible
            self.generations[generation] = (f"{seen[0]}+{protocol}", seen[1])

    def rows(self) -> tuple[GenerationApps, ...]:
        return tuple(
            GenerationApps(generation=g, protocol=p, kinds=frozenset(k))
            for g, (p, k) in sorted(self.generations.items())
        )
