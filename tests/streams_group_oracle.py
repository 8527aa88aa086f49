"""The broker's streams-group task assignor as an oracle: streamtasks' inputs to it and back.

``java/oracle/src/StreamsGroupOracle.java`` runs Apache Kafka 4.4.0's group-coordinator
``org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor`` (``sticky``, the
assignor a KIP-1071 streams group uses unless ``streams.assignor.name`` names another) on the
``GroupSpec`` the coordinator builds. It is compiled at first use against the embedded broker's
jars (:func:`streamtasks.embedded.kafka_classpath`: kafka-group-coordinator 4.4.0), and many
scenarios go to one JVM::

    answers = run_streams_group_oracle([state, ...])   # ApplicationStates
    answers[0]                                         # a TaskAssignment, or a StreamsGroupFailure

How an :class:`~assignors.types.ApplicationState` maps to a streams group:

* a process of capacity ``c`` is ``c`` members (one a stream thread) with its process id; its
  previous active and standby tasks and client tags go with its first member (the broker's
  assignor places by process and then spreads over the process's members);
* a subtopology is stateful when any of its tasks is, its partition count the highest task
  partition plus one (the scenarios here have every task of each subtopology);
* a known lag becomes a task offset sum of ``OFFSET_BASE - lag`` (the broker ranks standby
  candidates by reported offsets); the running lag and unknown lags send none;
* the broker has no warm-ups (4.4): its answer has actives and standbys only.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assignors.types import (
    INT64_MAX,
    RUNNING_LAG,
    ApplicationState,
    ProcessAssignment,
    ProcessId,
    TaskAssignment,
)
from streamtasks.embedded.java import JavaProgram, JavaUnavailable, compiled_program
from streamtasks.embedded.kafka_broker import kafka_classpath
from streamtasks.errors import BrokerError, StreamTasksError
from tests.oracle import OracleUnavailable
from topology.ids import TaskId

__all__ = [
    "OFFSET_BASE",
    "STREAMS_GROUP_ORACLE_SOURCE",
    "StreamsGroupFailure",
    "run_streams_group_oracle",
    "streams_group_program",
]

STREAMS_GROUP_ORACLE_SOURCE = Path(__file__).resolve().parents[1] / "java/oracle/src/StreamsGroupOracle.java"
#: A task's offset sum on a process that knows its lag: this base minus the lag.
OFFSET_BASE = 1_000_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupFailure:
    """The broker's assignor threw on this case (``error``: the Java exception)."""

    error: str


@functools.cache
def streams_group_program() -> JavaProgram:
    """The compiled harness, against the embedded broker's jars."""
    try:
        classpath = kafka_classpath()
    except BrokerError as exc:  # no mvn, or Maven could not resolve the broker's jars
        raise OracleUnavailable(f"the group-coordinator jar is not available: {exc}") from exc
    try:  # a source that does not compile is an error, not a skip
        return compiled_program(STREAMS_GROUP_ORACLE_SOURCE, classpath, cache="java-streams-group-oracle")
    except JavaUnavailable as exc:
        raise OracleUnavailable(str(exc)) from exc


def _member_ids(state: ApplicationState) -> dict[str, tuple[ProcessId, int]]:
    """Member id -> (process, thread index): a process of capacity ``c`` is ``c`` members."""
    pids = sorted(state.clients, key=str)
    return {f"{pid}-{i}": (pid, i) for pid in pids for i in range(state.clients[pid].capacity)}


def _by_subtopology(tasks: frozenset[TaskId]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t in sorted(tasks):
        out.setdefault(str(t.subtopology), []).append(t.partition)
    return out


def _scenario(state: ApplicationState) -> dict[str, Any]:
    partitions: dict[int, int] = {}
    stateful: set[int] = set()
    for task, spec in state.tasks.items():
        partitions[task.subtopology] = max(partitions.get(task.subtopology, 0), task.partition + 1)
        if spec.is_stateful:
            stateful.add(task.subtopology)
    members = []
    for member, (pid, index) in _member_ids(state).items():
        client = state.clients[pid]
        entry: dict[str, Any] = {"id": member, "process_id": str(pid)}
        entry["client_tags"] = dict(client.client_tags)
        if index == 0:
            offsets: dict[str, dict[str, int]] = {}
            for task, lag in sorted(client.task_lags.items()):
                if lag in (RUNNING_LAG, INT64_MAX) or task not in state.tasks or lag < 0:
                    continue
                offsets.setdefault(str(task.subtopology), {})[str(task.partition)] = OFFSET_BASE - lag
            entry |= {
                "active": _by_subtopology(client.previous_active),
                "standby": _by_subtopology(client.previous_standby),
                "task_offsets": offsets,
            }
        members.append(entry)
    return {
        "num_standby_replicas": state.configs.num_standby_replicas,
        "rack_aware_assignment_tags": list(state.configs.rack_aware_assignment_tags),
        "subtopologies": [
            {"id": str(s), "partitions": n, "stateful": s in stateful} for s, n in sorted(partitions.items())
        ],
        "members": members,
    }


def _tasks(by_subtopology: dict[str, list[int]]) -> frozenset[TaskId]:
    return frozenset(TaskId(int(s), p) for s, parts in by_subtopology.items() for p in parts)


def _result(state: ApplicationState, answer: dict[str, Any]) -> TaskAssignment | StreamsGroupFailure:
    if "error" in answer:
        return StreamsGroupFailure(error=str(answer["error"]))
    active: dict[ProcessId, set[TaskId]] = {pid: set() for pid in state.clients}
    standby: dict[ProcessId, set[TaskId]] = {pid: set() for pid in state.clients}
    owners = _member_ids(state)
    for member, tasks in answer["members"].items():
        pid = owners[member][0]
        active[pid] |= _tasks(tasks["active"])
        standby[pid] |= _tasks(tasks["standby"])
    return TaskAssignment(
        processes=tuple(
            ProcessAssignment(process_id=pid, active=frozenset(active[pid]), standby=frozenset(standby[pid]))
            for pid in sorted(state.clients, key=str)
        )
    )


def run_streams_group_oracle(
    states: Sequence[ApplicationState], *, timeout_s: float = 600.0
) -> list[TaskAssignment | StreamsGroupFailure]:
    """The broker's ``StickyTaskAssignor`` answers to ``states``, in order, from one JVM."""
    if not states:
        return []
    program = streams_group_program()
    payload = json.dumps({"scenarios": [_scenario(s) for s in states]}, separators=(",", ":"))
    done = subprocess.run(
        program.command("-Xmx1g", "-XX:+UseSerialGC"),
        input=payload.encode(),
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise StreamTasksError(
            f"the streams-group assignor oracle failed (exit {done.returncode}):\n"
            + done.stderr.decode()[-4000:]
        )
    answers = json.loads(done.stdout)["results"]
    return [_result(s, a) for s, a in zip(states, answers, strict=True)]
