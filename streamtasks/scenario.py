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

A process's ``id`` may be a UUID; without one a stable UUID is derived from its name. Tasks a
process ran as active and gives no lag for are taken as running (lag ``running``).
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assignors import RUNNING_LAG, ApplicationState, AssignmentConfigs, ClientState, TaskSpec
from streamtasks.errors import ConfigError, StreamTasksError
from topology import RepartitionTopic, StateStore, Subtopology, TaskId, Topology

__all__ = ["Scenario", "load_scenario", "parse_scenario"]

#: Namespace for process ids derived from names, so a name maps to the same UUID everywhere.
PROCESS_NAMESPACE = uuid.UUID("6f1d8c4e-2b7a-5d3e-9c0f-8a4b2e6d1f37")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Store(_Model):
    name: str
    logging: bool = True


class _Repartition(_Model):
    name: str
    partitions: int | None = Field(default=None, ge=1)


class _Subtopology(_Model):
    id: int | None = Field(default=None, ge=0)
    sources: list[str] = []
    repartition_sources: list[str] = []
    repartition_sinks: list[str] = []
    stores: list[_Store | str] = []


class _Topology(_Model):
    subtopologies: list[_Subtopology] = Field(min_length=1)
    repartition_topics: list[_Repartition] = []


class _Process(_Model):
    name: str
    id: uuid.UUID | None = None
    capacity: int = 1
    rack: str | None = None
    client_tags: dict[str, str] = {}
    previous_active: list[str] = []
    previous_standby: list[str] = []
    lags: dict[str, int | Literal["running"]] = {}


class _Scenario(_Model):
    application_id: str
    assignor: str | None = None
    now_ms: int = 0
    partitions: dict[str, int]
    topology: _Topology
    configs: dict[str, Any] = {}
    processes: list[_Process] = Field(min_length=1)


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
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read scenario {p}: {exc.strerror or exc}") from exc
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
    return "; ".join(
        f"{'.'.join(str(x) for x in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
    )


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
    tasks = [
        TaskSpec(
            id=t.id,
            is_stateful=t.is_stateful,
            source_partitions=t.source_partitions,
            changelog_partitions=t.changelog_partitions,
        )
        for t in topo.tasks(doc.partitions)
    ]
    try:
        configs = AssignmentConfigs(**doc.configs)
    except TypeError as exc:
        known = ", ".join(AssignmentConfigs.__dataclass_fields__)
        raise ConfigError(f"unknown assignment config ({exc}); known: {known}") from None
    names: dict[uuid.UUID, str] = {}
    clients: list[ClientState] = []
    for proc in doc.processes:
        pid = proc.id or uuid.uuid5(PROCESS_NAMESPACE, proc.name)
        if pid in names:
            raise ConfigError(f"process {proc.name!r} has the same id as process {names[pid]!r}: {pid}")
        names[pid] = proc.name
        active = frozenset(_task(t, proc.name) for t in proc.previous_active)
        lags = {_task(t, proc.name): (RUNNING_LAG if v == "running" else v) for t, v in proc.lags.items()}
        for t in active:
            lags.setdefault(t, RUNNING_LAG)
        clients.append(
            ClientState(
                process_id=pid,
                capacity=proc.capacity,
                rack=proc.rack,
                client_tags=proc.client_tags,
                previous_active=active,
                previous_standby=frozenset(_task(t, proc.name) for t in proc.previous_standby),
                task_lags=lags,
            )
        )
    state = ApplicationState.build(tasks, clients, configs, now_ms=doc.now_ms)
    return Scenario(topology=topo, state=state, names=names, assignor=doc.assignor)


def _task(text: str, process: str) -> TaskId:
    try:
        return TaskId.parse(text)
    except StreamTasksError as exc:
        raise ConfigError(f"process {process!r}: {exc}") from None
