"""Assignment scenarios: a topology, partition counts, processes and configs in YAML or JSON.

A scenario is what ``streamtasks assign`` reads. It turns into an
:class:`assignors.ApplicationState` plus display names for the processes::

    application_id: wordcount
    assignor: high_availability          # optional; --assignor overrides it
    partitions: {text-lines: 6}
    topology:
      repartition_topics: [{name: words}]
      subtopologies:
        - {sources: [text-lines], repartition_sinks: [words]}
        - {repartition_sources: [words], stores: [{name: counts}]}
    configs: {num_standby_replicas: 1}
    processes:
      - name: alpha
        capacity: 2
        rack: eu-1a
        previous_active: ["1_0"]
        lags: {"1_1": 120}
    partition_racks: {text-lines: [[eu-1a, eu-1b], [eu-1b, eu-1c], ...]}   # optional, KIP-925

A process's ``id`` may be a UUID; without one a stable UUID is derived from its name. Tasks a
process ran as active and gives no lag for are taken as running (lag ``running``).

The file is UTF-8 (a BOM is allowed). Numbers are strict: ``true``, ``1.7`` or ``"2"`` where an
int belongs is an error, never read as 1 or 2, and each int has Kafka's range (partition counts
and capacities are int32 and >= 1, lags and times int64 and >= 0; the ``configs`` ranges are
:data:`assignors.types.CONFIG_BOUNDS`). Every problem is a :class:`ConfigError` on one line that
names the file and the field, e.g. ``s.yaml: configs.num_standby_replicas: Input should be a
valid integer, got 1.7``.

Example scenarios ship inside the package (``streamtasks/scenarios/*.yaml``), so an installed
``streamtasks`` reads them by name: ``streamtasks assign sample``. A name that is not an
existing file and has no suffix is looked up there (:func:`example_scenarios`).
"""

from __future__ import annotations

import json
import reprlib
import sys
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from assignors import RUNNING_LAG, ApplicationState, AssignmentConfigs, ClientState, TaskSpec
from assignors.types import CONFIG_BOUNDS, INT32_MAX, INT64_MAX
from streamtasks.errors import ConfigError, StreamTasksError
from topology import RepartitionTopic, StateStore, Subtopology, TaskId, Topology
from topology.ids import TopicPartition

__all__ = ["EXAMPLES_DIR", "Scenario", "example_scenarios", "load_scenario", "parse_scenario"]

#: The example scenarios packaged with streamtasks (package data, in a wheel as in a checkout).
EXAMPLES_DIR = Path(__file__).with_name("scenarios")

#: Namespace for process ids derived from names, so a name maps to the same UUID everywhere.
PROCESS_NAMESPACE = uuid.UUID("6f1d8c4e-2b7a-5d3e-9c0f-8a4b2e6d1f37")

#: At most this many problems are listed in one error message (the rest are counted).
MAX_PROBLEMS = 10

# Integers are strict (no bool, float or numeric string) and bounded by Kafka's types.
PartitionCount = Annotated[StrictInt, Field(ge=1, le=INT32_MAX)]
Capacity = Annotated[StrictInt, Field(ge=1, le=INT32_MAX)]
SubtopologyId = Annotated[StrictInt, Field(ge=0, le=INT32_MAX)]
Millis = Annotated[StrictInt, Field(ge=0, le=INT64_MAX)]


def _lag(value: object) -> int:
    if isinstance(value, str) and value == "running":
        return RUNNING_LAG
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT64_MAX:
        return value
    raise PydanticCustomError(
        "lag", "Input should be an int from 0 to {high} or 'running'", {"high": INT64_MAX}
    )


#: A task's lag on a process: an int offset count, or ``running`` for a task it runs now.
Lag = Annotated[int, PlainValidator(_lag)]


def _store_by_name(value: object) -> object:
    return {"name": value} if isinstance(value, str) else value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Store(_Model):
    name: str
    logging: StrictBool = True


class _Repartition(_Model):
    name: str
    partitions: PartitionCount | None = None


class _Subtopology(_Model):
    id: SubtopologyId | None = None
    sources: list[str] = []
    repartition_sources: list[str] = []
    repartition_sinks: list[str] = []
    stores: list[Annotated[_Store, BeforeValidator(_store_by_name)]] = []


class _Topology(_Model):
    subtopologies: list[_Subtopology] = Field(min_length=1)
    repartition_topics: list[_Repartition] = []


def _config(name: str) -> Any:
    """A field of ``configs``: strict int in :data:`CONFIG_BOUNDS`; unset leaves the default
    to :class:`AssignmentConfigs` (the default is not validated; ``null`` in the file is)."""
    low, high = CONFIG_BOUNDS[name]
    return Field(default=None, strict=True, ge=low, le=high)


class _Configs(_Model):
    """The :class:`AssignmentConfigs` a scenario sets (a test keeps the two field lists equal)."""

    num_standby_replicas: int = _config("num_standby_replicas")
    acceptable_recovery_lag: int = _config("acceptable_recovery_lag")
    max_warmup_replicas: int = _config("max_warmup_replicas")
    probing_rebalance_interval_ms: int = _config("probing_rebalance_interval_ms")
    rack_aware_assignment_tags: tuple[str, ...] = ()
    rack_aware_assignment_strategy: Literal["none", "min_traffic", "balance_subtopology"] = "none"
    rack_aware_assignment_traffic_cost: StrictInt | None = Field(default=None, ge=0, le=INT32_MAX)
    rack_aware_assignment_non_overlap_cost: StrictInt | None = Field(default=None, ge=0, le=INT32_MAX)


class _Process(_Model):
    name: str
    id: uuid.UUID | None = None
    capacity: Capacity = 1
    rack: str | None = None
    client_tags: dict[str, str] = {}
    previous_active: list[str] = []
    previous_standby: list[str] = []
    lags: dict[str, Lag] = {}


class _Scenario(_Model):
    application_id: str
    assignor: str | None = None
    now_ms: Millis = 0
    partitions: dict[str, PartitionCount]
    topology: _Topology
    configs: _Configs = _Configs()
    processes: list[_Process] = Field(min_length=1)
    #: Per topic, per partition, the racks of its replicas (KIP-925's rack-aware placement).
    partition_racks: dict[str, list[list[str]]] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A loaded scenario: the assignor input, the topology, and a display name per process."""

    topology: Topology
    state: ApplicationState
    names: Mapping[uuid.UUID, str]
    assignor: str | None


def load_scenario(path: str | Path) -> Scenario:
    """Read a ``.yaml``/``.yml``/``.json`` scenario file (UTF-8, a BOM allowed).

    Any problem with the file is a :class:`ConfigError` with a one-line message that names it.
    """
    p = _resolve(Path(path))
    try:
        data = p.read_bytes()
    except OSError as exc:
        known = ", ".join(example_scenarios()) or "none"
        raise ConfigError(
            f"cannot read scenario {p}: {exc.strerror or exc} (packaged examples, by name: {known})"
        ) from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:  # exc.object lacks the BOM, if there is one
        offset = len(data) - len(exc.object) + exc.start
        raise ConfigError(
            f"scenario {p} is not UTF-8 text: byte 0x{data[offset]:02x} at offset {offset}"
        ) from None
    if not text.strip():
        raise ConfigError(f"scenario {p} is empty")
    kind = "JSON" if p.suffix == ".json" else "YAML"
    try:
        raw = json.loads(text) if kind == "JSON" else yaml.safe_load(text)
    except RecursionError:
        raise ConfigError(f"scenario {p} nests too deeply to be read as {kind}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"scenario {p} is not valid YAML: {_yaml_problem(exc)}") from None
    except ValueError as exc:  # json.JSONDecodeError, or an int of more digits than Python reads
        problem = str(exc)
        if "integer string conversion" in problem:
            problem = f"a number has more than {sys.get_int_max_str_digits()} digits"
        raise ConfigError(f"scenario {p} is not valid {kind}: {_one_line(problem)}") from None
    return parse_scenario(raw, source=str(p))


def example_scenarios() -> dict[str, Path]:
    """The packaged example scenarios by name (``{"sample": .../scenarios/sample.yaml}``)."""
    return {p.stem: p for p in sorted(EXAMPLES_DIR.glob("*.yaml"))}


def _resolve(path: Path) -> Path:
    """``path`` itself, or the packaged example it names (a bare name that is not a file)."""
    if path.exists() or path.suffix or len(path.parts) != 1:
        return path
    return example_scenarios().get(path.name, path)


def parse_scenario(raw: object, *, source: str = "<scenario>") -> Scenario:
    """Validate a decoded scenario document and build the assignor input."""
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{source}: a scenario is a mapping (application_id, partitions, topology, processes, ...), "
            f"not {_kind(raw)}"
        )
    try:
        doc = _Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_problems(exc)}") from None
    try:
        return _build(doc)
    except StreamTasksError as exc:
        raise ConfigError(f"{source}: {exc}") from exc


def _problems(exc: ValidationError) -> str:
    """pydantic's errors as ``field.path: problem, got value``, joined on one line."""
    errors = exc.errors(include_url=False)
    lines: list[str] = []
    for err in errors[:MAX_PROBLEMS]:
        loc = err["loc"]
        where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in loc).lstrip(".")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
            if loc[:1] == ("configs",):
                msg = f"unknown assignment config; known: {', '.join(_Configs.model_fields)}"
        elif err["type"] == "missing":
            msg = err["msg"]
        else:
            msg = "Input should be a mapping" if err["type"] == "model_type" else err["msg"]
            msg += f", got {_short(err['input'])}"
        lines.append(f"{where or '<root>'}: {msg}")
    if len(errors) > MAX_PROBLEMS:
        lines.append(f"and {len(errors) - MAX_PROBLEMS} more problems")
    return "; ".join(lines)


def _short(value: object) -> str:
    """A value as the file spells it, bounded in length whatever it is."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, list | dict):
        return _kind(value)
    return reprlib.repr(value)


def _kind(value: object) -> str:
    if value is None:
        return "an empty document"
    names: dict[type, str] = {
        list: "a list",
        dict: "a mapping",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
    }
    return names.get(type(value), f"a {type(value).__name__}")


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's several-line message as one line: the problem and where it is."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        context = f"{exc.context}, " if exc.context else ""
        return _one_line(f"{context}{exc.problem}{where}")
    if isinstance(exc, yaml.reader.ReaderError):
        return _one_line(f"{exc.reason} (character #x{exc.character:04x} at offset {exc.position})")
    return _one_line(str(exc))


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _build(doc: _Scenario) -> Scenario:
    topo = Topology(
        application_id=doc.application_id,
        subtopologies=tuple(
            Subtopology(
                id=s.id if s.id is not None else i,
                sources=tuple(s.sources),
                repartition_sources=tuple(s.repartition_sources),
                repartition_sinks=tuple(s.repartition_sinks),
                stores=tuple(
                    StateStore(name=st)
                    if isinstance(st, str)
                    else StateStore(name=st.name, logging=st.logging)
                    for st in s.stores
                ),
            )
            for i, s in enumerate(doc.topology.subtopologies)
        ),
        repartition_topics=tuple(
            RepartitionTopic(name=r.name, partitions=r.partitions) for r in doc.topology.repartition_topics
        ),
    )
    tasks = [TaskSpec.of_task(t) for t in topo.tasks(doc.partitions)]
    known = frozenset(spec.id for spec in tasks)
    try:
        configs = AssignmentConfigs(**doc.configs.model_dump(exclude_unset=True))
    except StreamTasksError as exc:
        raise ConfigError(f"configs: {exc}") from None
    names: dict[uuid.UUID, str] = {}
    clients: list[ClientState] = []
    for proc in doc.processes:
        pid = proc.id or uuid.uuid5(PROCESS_NAMESPACE, proc.name)
        if pid in names:
            raise ConfigError(f"process {proc.name!r} has the same id as process {names[pid]!r}: {pid}")
        names[pid] = proc.name
        active = frozenset(_task(t, proc.name) for t in proc.previous_active)
        standby = frozenset(_task(t, proc.name) for t in proc.previous_standby)
        lags = {_task(t, proc.name): lag for t, lag in proc.lags.items()}
        _check_known(proc.name, known, previous=active | standby, lags=lags.keys())
        for t in active:
            lags.setdefault(t, RUNNING_LAG)
        clients.append(
            ClientState(
                process_id=pid,
                capacity=proc.capacity,
                rack=proc.rack,
                client_tags=proc.client_tags,
                previous_active=active,
                previous_standby=standby,
                task_lags=lags,
            )
        )
    racks_of = {
        TopicPartition(topic, p): racks
        for topic, per_partition in doc.partition_racks.items()
        for p, racks in enumerate(per_partition)
    }
    state = ApplicationState.build(tasks, clients, configs, now_ms=doc.now_ms, partition_racks=racks_of)
    return Scenario(topology=topo, state=state, names=names, assignor=doc.assignor)


def _task(text: str, process: str) -> TaskId:
    try:
        return TaskId.parse(text)
    except StreamTasksError as exc:
        raise ConfigError(f"process {process!r}: {exc}") from None


def _check_known(
    process: str, known: frozenset[TaskId], *, previous: Iterable[TaskId], lags: Iterable[TaskId]
) -> None:
    """A process's previous tasks and lags name tasks the topology has (the process by its name)."""
    for what, tasks in (("previous tasks", previous), ("lags for tasks", lags)):
        unknown = sorted(t for t in tasks if t not in known)
        if unknown:
            raise ConfigError(
                f"process {process!r} reports {what} {', '.join(map(str, unknown))} that the topology "
                f"does not have (its tasks: {_span(known)})"
            )


def _span(tasks: frozenset[TaskId]) -> str:
    """The topology's tasks, briefly: each subtopology's partition range."""
    parts: dict[int, list[int]] = {}
    for t in sorted(tasks):
        parts.setdefault(t.subtopology, []).append(t.partition)
    return ", ".join(
        f"{s}_{p[0]}" if len(p) == 1 else f"{s}_{p[0]}..{s}_{p[-1]}" for s, p in sorted(parts.items())
    )
