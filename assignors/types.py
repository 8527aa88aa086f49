"""Task assignor input and output, shaped after Kafka's KIP-924 API.

All values are immutable. Collections handed in are normalised to frozensets / tuples and
mappings are copied into read-only views, so an assignor can never depend on the iteration
order of what came off the wire.
"""

from __future__ import annotations

import bisect
import enum
import reprlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Protocol, TypeGuard, runtime_checkable

from streamtasks.errors import AssignorInputError
from topology.ids import TaskId, TopicPartition
from topology.model import TaskInfo

__all__ = [
    "CONFIG_BOUNDS",
    "INT32_MAX",
    "INT64_MAX",
    "RACK_AWARE_STRATEGIES",
    "RUNNING_LAG",
    "ApplicationState",
    "AssignmentConfigs",
    "AssignmentError",
    "ClientState",
    "ProcessAssignment",
    "ProcessId",
    "TaskAssignment",
    "TaskAssignor",
    "TaskSpec",
]

ProcessId = uuid.UUID

#: Lag sentinel for a task the process runs right now as active: caught up by definition
#: (Kafka Streams' ``Task.LATEST_OFFSET``).
RUNNING_LAG = -2

#: The largest Kafka ``int32`` / ``int64`` (counts are int32 in Kafka's configs, lags and
#: durations int64).
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: The inclusive range of each integer field of :class:`AssignmentConfigs`: Kafka Streams' own
#: lower bounds, its Java types' upper bounds. The one home of these rules: a configuration front
#: end (the scenario file's pydantic model) reads them from here instead of restating them.
CONFIG_BOUNDS: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        "num_standby_replicas": (0, INT32_MAX),
        "acceptable_recovery_lag": (0, INT64_MAX),
        "max_warmup_replicas": (1, INT32_MAX),
        "probing_rebalance_interval_ms": (60_000, INT64_MAX),
    }
)


def _is_int(value: object) -> TypeGuard[int]:
    """An ``int`` proper: ``bool`` is not a count, and floats and strings are not ints."""
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: object) -> str:
    """A bad value for an error message: bounded in length whatever it is, typed unless an int."""
    if _is_int(value):
        return str(value) if value.bit_length() <= 128 else f"an int of {value.bit_length()} bits"
    return "None" if value is None else f"{type(value).__name__} {reprlib.repr(value)}"


#: Kafka Streams' ``rack.aware.assignment.strategy`` values (KIP-925): ``none`` (off),
#: ``min_traffic`` (least cross-rack traffic, then least movement) and ``balance_subtopology``
#: (the same, keeping each subtopology's tasks spread over the processes).
RACK_AWARE_STRATEGIES: tuple[str, ...] = ("none", "min_traffic", "balance_subtopology")


class AssignmentError(enum.Enum):
    """KIP-924's verdict on a task assignment (``TaskAssignor.AssignmentError``)."""

    NONE = "NONE"
    ACTIVE_TASK_ASSIGNED_MULTIPLE_TIMES = "ACTIVE_TASK_ASSIGNED_MULTIPLE_TIMES"
    INVALID_STANDBY_TASK = "INVALID_STANDBY_TASK"
    MISSING_PROCESS_ID = "MISSING_PROCESS_ID"
    UNKNOWN_PROCESS_ID = "UNKNOWN_PROCESS_ID"
    UNKNOWN_TASK_ID = "UNKNOWN_TASK_ID"


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignmentConfigs:
    """KIP-441 / KIP-924 knobs every task assignor reads."""

    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    probing_rebalance_interval_ms: int = 600_000
    #: Client tag keys across which standbys are spread (Kafka's rack.aware.assignment.tags).
    rack_aware_assignment_tags: tuple[str, ...] = ()
    #: KIP-925: how actives are placed against the racks of their input partitions' replicas
    #: (:data:`RACK_AWARE_STRATEGIES`); needs every process's rack and
    #: :attr:`ApplicationState.partition_racks`.
    rack_aware_assignment_strategy: str = "none"
    #: KIP-925's cost of one input partition read from another rack, and of a task placed off the
    #: process the balanced assignment gave it; ``None``: Kafka Streams' defaults (10 and 1 for
    #: stateful tasks; stateless ones always weigh 1 and 0).
    rack_aware_assignment_traffic_cost: int | None = None
    rack_aware_assignment_non_overlap_cost: int | None = None

    def __post_init__(self) -> None:
        for name, (low, high) in CONFIG_BOUNDS.items():
            value = getattr(self, name)
            if not _is_int(value):
                raise AssignorInputError(f"{name} must be an int, got {_shown(value)}")
            if value < low:
                raise AssignorInputError(f"{name} must be >= {low}, got {_shown(value)}")
            if value > high:
                raise AssignorInputError(f"{name} must be <= {high}, got {_shown(value)}")
        tags = self.rack_aware_assignment_tags
        if isinstance(tags, str | bytes) or not isinstance(tags, Iterable):
            raise AssignorInputError(
                f"rack_aware_assignment_tags must be a sequence of tag keys, got {_shown(tags)}"
            )
        tags = tuple(tags)
        for tag in tags:
            if not isinstance(tag, str) or not tag:
                raise AssignorInputError(
                    f"rack_aware_assignment_tags must hold non-empty strings, got {_shown(tag)}"
                )
        if len(set(tags)) != len(tags):
            raise AssignorInputError(f"rack_aware_assignment_tags lists a tag twice: {list(tags)}")
        object.__setattr__(self, "rack_aware_assignment_tags", tags)
        if self.rack_aware_assignment_strategy not in RACK_AWARE_STRATEGIES:
            raise AssignorInputError(
                f"rack_aware_assignment_strategy must be one of {list(RACK_AWARE_STRATEGIES)}, "
                f"got {_shown(self.rack_aware_assignment_strategy)}"
            )
        for name in ("rack_aware_assignment_traffic_cost", "rack_aware_assignment_non_overlap_cost"):
            cost = getattr(self, name)
            if cost is not None and (not _is_int(cost) or not 0 <= cost <= INT32_MAX):
                raise AssignorInputError(
                    f"{name} must be None or an int from 0 to {INT32_MAX}, got {_shown(cost)}"
                )


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
    """What an assignor knows of a task (KIP-924 ``TaskInfo``)."""

    id: TaskId
    is_stateful: bool
    source_partitions: tuple[TopicPartition, ...] = ()
    changelog_partitions: tuple[TopicPartition, ...] = ()

    @classmethod
    def of_task(cls, task: TaskInfo) -> TaskSpec:
        """The assignor's view of one of a topology's tasks."""
        return cls(
            id=task.id,
            is_stateful=task.is_stateful,
            source_partitions=task.source_partitions,
            changelog_partitions=task.changelog_partitions,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientState:
    """One process of the application (KIP-924 ``KafkaStreamsState``).

    ``task_lags`` holds a lag for every task this process has local state for; a task it
    runs now as active may carry :data:`RUNNING_LAG`. A task absent from it has unknown,
    effectively infinite, lag on this process.
    """

    process_id: ProcessId
    capacity: int = 1
    rack: str | None = None
    client_tags: Mapping[str, str] = field(default_factory=dict)
    previous_active: frozenset[TaskId] = frozenset()
    previous_standby: frozenset[TaskId] = frozenset()
    task_lags: Mapping[TaskId, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.process_id, uuid.UUID):
            raise AssignorInputError(f"process_id must be a UUID, got {self.process_id!r}")
        if not _is_int(self.capacity):
            raise AssignorInputError(
                f"process {self.process_id}: capacity must be an int, got {_shown(self.capacity)}"
            )
        if not 1 <= self.capacity <= INT32_MAX:
            raise AssignorInputError(
                f"process {self.process_id} has capacity {_shown(self.capacity)}; "
                f"need 1 to {INT32_MAX} threads"
            )
        for task, lag in self.task_lags.items():
            if not _is_int(lag):
                raise AssignorInputError(
                    f"process {self.process_id}: the lag of task {task} must be an int, got {_shown(lag)}"
                )
            if (lag < 0 and lag != RUNNING_LAG) or lag > INT64_MAX:
                raise AssignorInputError(
                    f"process {self.process_id} reports lag {_shown(lag)} for task {task}; lags are "
                    f"0 to {INT64_MAX}, or {RUNNING_LAG} for a task it runs now"
                )
        overlap = set(self.previous_active) & set(self.previous_standby)
        if overlap:
            raise AssignorInputError(
                f"process {self.process_id} claims tasks {sorted(map(str, overlap))} "
                "both as previous active and previous standby"
            )
        object.__setattr__(self, "previous_active", frozenset(self.previous_active))
        object.__setattr__(self, "previous_standby", frozenset(self.previous_standby))
        object.__setattr__(self, "client_tags", MappingProxyType(dict(self.client_tags)))
        object.__setattr__(self, "task_lags", MappingProxyType(dict(self.task_lags)))

    def lag_for(self, task: TaskId) -> int | None:
        """The lag of ``task`` here, :data:`RUNNING_LAG` when running, ``None`` when unknown."""
        return self.task_lags.get(task)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplicationState:
    """Everything a task assignor sees (KIP-924 ``ApplicationState``).

    ``now_ms`` is the leader's clock at assignment time, injected so that assignors stay
    pure: follow-up rebalance deadlines are computed from it. ``partition_racks``: the racks of
    each input partition's replicas (the cluster metadata's brokers' racks), what KIP-925's
    rack-aware active placement weighs; empty when unknown.
    """

    tasks: Mapping[TaskId, TaskSpec]
    clients: Mapping[ProcessId, ClientState]
    configs: AssignmentConfigs = AssignmentConfigs()
    now_ms: int = 0
    partition_racks: Mapping[TopicPartition, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.configs, AssignmentConfigs):
            raise AssignorInputError(f"configs must be an AssignmentConfigs, got {_shown(self.configs)}")
        if not _is_int(self.now_ms):
            raise AssignorInputError(f"now_ms must be an int, got {_shown(self.now_ms)}")
        object.__setattr__(self, "tasks", MappingProxyType(dict(self.tasks)))
        object.__setattr__(self, "clients", MappingProxyType(dict(self.clients)))
        racks: dict[TopicPartition, frozenset[str]] = {}
        for tp, replicas in self.partition_racks.items():
            if isinstance(replicas, str | bytes) or not all(isinstance(r, str) for r in replicas):
                raise AssignorInputError(
                    f"the racks of partition {tp} must be strings, got {_shown(replicas)}"
                )
            racks[tp] = frozenset(replicas)
        object.__setattr__(self, "partition_racks", MappingProxyType(racks))
        for key, spec in self.tasks.items():
            if key != spec.id:
                raise AssignorInputError(f"task key {key} does not match its spec id {spec.id}")
        for pid, client in self.clients.items():
            if pid != client.process_id:
                raise AssignorInputError(f"client key {pid} does not match its process id")
            unknown = sorted(
                str(t) for t in (*client.previous_active, *client.previous_standby) if t not in self.tasks
            )
            if unknown:
                raise AssignorInputError(
                    f"process {pid} reports previous tasks {unknown} that the topology does not have"
                )

    @classmethod
    def build(
        cls,
        tasks: Iterable[TaskSpec],
        clients: Iterable[ClientState],
        configs: AssignmentConfigs | None = None,
        now_ms: int = 0,
        partition_racks: Mapping[TopicPartition, Iterable[str]] | None = None,
    ) -> ApplicationState:
        """Build from sequences; duplicate task or process ids are an :class:`AssignorInputError`."""
        task_map: dict[TaskId, TaskSpec] = {}
        for spec in tasks:
            if spec.id in task_map:
                raise AssignorInputError(f"task {spec.id} is listed twice")
            task_map[spec.id] = spec
        client_map: dict[ProcessId, ClientState] = {}
        for client in clients:
            if client.process_id in client_map:
                raise AssignorInputError(f"process id {client.process_id} is listed twice")
            client_map[client.process_id] = client
        racks: dict[TopicPartition, frozenset[str]] = {}
        for tp, replicas in (partition_racks or {}).items():
            if isinstance(replicas, str | bytes):
                raise AssignorInputError(
                    f"the racks of partition {tp} must be a set of strings, got {replicas!r}"
                )
            racks[tp] = frozenset(replicas)
        return cls(
            tasks=task_map,
            clients=client_map,
            configs=configs or AssignmentConfigs(),
            now_ms=now_ms,
            partition_racks=racks,
        )

    def sorted_task_ids(self) -> list[TaskId]:
        return sorted(self.tasks)

    def sorted_process_ids(self) -> list[ProcessId]:
        return sorted(self.clients)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessAssignment:
    """The tasks one process runs after this rebalance."""

    process_id: ProcessId
    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()

    @property
    def all_tasks(self) -> frozenset[TaskId]:
        return self.active | self.standby | self.warmup


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskAssignment:
    """An assignor's answer: one entry per process, sorted by process id.

    ``followup_rebalance_ms``: absolute time (the clock of ``ApplicationState.now_ms``) at
    which the group should rebalance again, or ``None`` when the assignment is final.
    ``movements``: for each task whose active stays where it is only until a replica elsewhere
    has caught up (KIP-441), the process it is meant to move to. A standby on that process warms
    the task up just like a warm-up replica does, and the runtime treats it as one (its
    catching up is what the follow-up rebalance waits for).
    """

    processes: tuple[ProcessAssignment, ...]
    followup_rebalance_ms: int | None = None
    movements: Mapping[TaskId, ProcessId] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "processes", tuple(sorted(self.processes, key=lambda p: p.process_id)))
        object.__setattr__(self, "movements", MappingProxyType(dict(self.movements)))

    def for_process(self, process_id: ProcessId) -> ProcessAssignment:
        """The (first) entry of ``process_id``: a binary search, ``processes`` being sorted by
        process id (a caller asking for every process is not quadratic in processes)."""
        i = bisect.bisect_left(self.processes, process_id, key=lambda p: p.process_id)
        if i < len(self.processes) and self.processes[i].process_id == process_id:
            return self.processes[i]
        raise KeyError(process_id)

    def active_owner(self) -> dict[TaskId, ProcessId]:
        """Task → process running it as active (last one wins if the assignment is invalid)."""
        return {t: p.process_id for p in self.processes for t in p.active}

    @property
    def needs_followup(self) -> bool:
        return self.followup_rebalance_ms is not None


@runtime_checkable
class TaskAssignor(Protocol):
    """A pluggable task assignor. Implementations must be deterministic and pure."""

    name: ClassVar[str]

    def assign(self, state: ApplicationState) -> TaskAssignment: ...
