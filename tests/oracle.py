"""Kafka's own assignors as oracles: streamtasks' inputs to the Java harness and back.

``java/oracle/src/Oracle.java`` runs Kafka Streams' ``HighAvailabilityTaskAssignor`` and
kafka-clients' ``CooperativeStickyAssignor``. It is compiled at first use against the jars that
``java/oracle/pom.xml`` resolves (:func:`streamtasks.embedded.kafka_classpath`, cached by the
pom's hash; the classes by the source's, see :mod:`streamtasks.embedded.java`). Many scenarios
go to one JVM::

    kafka = run_oracle([TaskCase(state), GroupCase(group)])
    kafka[0].assignment   # a TaskAssignment, in streamtasks' types
    kafka[1].target       # CooperativeStickyAssignor's target, member -> partitions

:func:`task_quality` and :func:`group_quality` measure streamtasks' answers and the oracle's
the same way. The test (``tests/assignors/test_oracle.py``) and the benchmark
(``benchmarks/bench_oracle.py``) use this module; nothing in the package does.

How streamtasks' inputs map to Kafka's:

* A process is a ``ClientState`` (Kafka's test constructor): capacity, previous active and
  standby tasks, client tags, and a lag for every stateful task. A lag streamtasks does not
  know (the process has no state for the task: effectively infinite) is ``Long.MAX_VALUE``;
  :data:`~assignors.types.RUNNING_LAG` is Kafka's ``Task.LATEST_OFFSET``, the same ``-2``.
* Racks: each process's rack, and with a ``rack_aware_assignment_strategy`` other than
  ``none`` (KIP-925) the strategy, its costs, each task's input partitions and the partitions'
  replica racks (a ``Cluster`` with one broker per rack), so that Kafka's
  ``RackAwareTaskAssignor`` optimises the actives, and each task's changelog partitions with
  their racks (described by a stand-in for its ``InternalTopicManager``) for its standbys.
  ``rack_aware_assignment_tags`` and client tags are passed (its tag-aware standbys).
* Kafka Streams returns warm-ups as standbys. A task's standbys beyond
  ``min(num_standby_replicas, processes - 1)`` are counted as its warm-ups.
* A consumer is a ``Subscription`` with its topics, owned partitions and generation (consumer
  protocol v2+, no user data, no rack). Claims on partitions that do not exist (a topic nobody
  subscribes to, a number beyond the count) are left out: Kafka's sticky assignors fail on them
  ("No more unfilled consumers"), and no real member can own one.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from assignors import cooperative
from assignors.partition.sticky import CooperativeStickyAssignor
from assignors.partition.types import GroupAssignment, GroupSubscription, MemberId, RebalanceProtocol
from assignors.types import (
    INT64_MAX,
    ApplicationState,
    ProcessAssignment,
    TaskAssignment,
)
from streamtasks.embedded.java import JavaProgram, JavaUnavailable, compiled_program
from streamtasks.embedded.kafka_broker import kafka_classpath, kafka_version
from streamtasks.errors import StreamTasksError
from topology.ids import TaskId, TopicPartition

__all__ = [
    "ORACLE_POM",
    "ORACLE_SOURCE",
    "GroupCase",
    "GroupQuality",
    "KafkaFailure",
    "KafkaGroupResult",
    "KafkaTaskResult",
    "OracleUnavailable",
    "TaskCase",
    "TaskQuality",
    "describe_assignment",
    "describe_state",
    "group_quality",
    "oracle_program",
    "oracle_versions",
    "run_oracle",
    "streamtasks_group",
    "task_quality",
]

ROOT = Path(__file__).resolve().parents[1]
ORACLE_POM = ROOT / "java" / "oracle" / "pom.xml"
ORACLE_SOURCE = ROOT / "java" / "oracle" / "src" / "Oracle.java"
#: The oracle's JVM: enough heap for Kafka Streams' per-client lag maps at 1,000 x 10,000.
JVM_OPTIONS = ("-Xms256m", "-Xmx4g", "-XX:+UseParallelGC", "-Djava.awt.headless=true")


class OracleUnavailable(Exception):
    """The oracle cannot run here; the message says what to install."""


@functools.cache
def oracle_program() -> JavaProgram:
    """The compiled harness (Maven resolves the jars, javac compiles, both once and cached)."""
    try:
        return compiled_program(ORACLE_SOURCE, kafka_classpath(ORACLE_POM), cache="java-oracle")
    except JavaUnavailable as exc:
        raise OracleUnavailable(str(exc)) from exc
    except StreamTasksError as exc:  # BrokerError: no mvn, or Maven could not resolve the jars
        raise OracleUnavailable(f"Kafka's assignor jars are not available: {exc}") from exc


def oracle_versions() -> str:
    """``kafka-streams X / kafka-clients X`` as the oracle's pom names them."""
    version = kafka_version(ORACLE_POM)
    return f"kafka-streams {version} / kafka-clients {version}"


# -- scenarios --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskCase:
    """An application for Kafka Streams' ``HighAvailabilityTaskAssignor``."""

    state: ApplicationState


@dataclass(frozen=True, slots=True)
class GroupCase:
    """A consumer group for kafka-clients' ``CooperativeStickyAssignor``."""

    group: GroupSubscription


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaTaskResult:
    """Kafka Streams' answer: ``assignment`` has its actives and standbys (warm-ups included:
    Kafka does not tell them apart), ``warmups`` the count of extra standbys."""

    assignment: TaskAssignment
    followup: bool
    warmups: int
    seconds: tuple[float, ...]
    #: whether Kafka's RackAwareTaskAssignor could run (KIP-925: a strategy, racks everywhere)
    rack_aware: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaGroupResult:
    """kafka-clients' answer: ``members`` is this round's (moving partitions withheld),
    ``target`` the assignment once the follow-up rebalance has handed them over."""

    members: Mapping[MemberId, tuple[TopicPartition, ...]]
    target: Mapping[MemberId, tuple[TopicPartition, ...]]
    seconds: tuple[float, ...]

    @property
    def followup(self) -> bool:
        return self.members != self.target


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaFailure:
    """Kafka's assignor threw on this case (``error``: the Java exception)."""

    error: str


def _task_request(state: ApplicationState) -> tuple[dict[str, Any], list[TaskId]]:
    tasks = sorted(state.tasks)
    index = {t: i for i, t in enumerate(tasks)}
    configs = state.configs
    clients = []
    for pid in sorted(state.clients, key=lambda u: u.int):
        c = state.clients[pid]
        clients.append(
            {
                "id": str(pid),
                "capacity": c.capacity,
                "tags": dict(c.client_tags),
                "rack": c.rack,
                "active": sorted(index[t] for t in c.previous_active),
                "standby": sorted(index[t] for t in c.previous_standby),
                "lags": sorted(
                    [index[t], lag]
                    for t, lag in c.task_lags.items()
                    if t in index and state.tasks[t].is_stateful
                ),
            }
        )
    request = {
        "kind": "task",
        "tasks": [[t.subtopology, t.partition, state.tasks[t].is_stateful] for t in tasks],
        "configs": {
            "num_standby_replicas": configs.num_standby_replicas,
            "acceptable_recovery_lag": configs.acceptable_recovery_lag,
            "max_warmup_replicas": configs.max_warmup_replicas,
            "probing_rebalance_interval_ms": configs.probing_rebalance_interval_ms,
            "rack_aware_assignment_tags": list(configs.rack_aware_assignment_tags),
            "rack_aware_assignment_strategy": configs.rack_aware_assignment_strategy,
            "rack_aware_assignment_traffic_cost": configs.rack_aware_assignment_traffic_cost,
            "rack_aware_assignment_non_overlap_cost": configs.rack_aware_assignment_non_overlap_cost,
        },
        "missing_lag": INT64_MAX,
        "clients": clients,
    }
    if configs.rack_aware_assignment_strategy != "none":
        # KIP-925: each task's input partitions and their replicas' racks (Kafka's Cluster)
        request["sources"] = [
            [[tp.topic, tp.partition] for tp in state.tasks[t].source_partitions] for t in tasks
        ]
        changelogs = {tp for t in tasks for tp in state.tasks[t].changelog_partitions}
        request["partition_racks"] = [
            [tp.topic, tp.partition, sorted(racks)]
            for tp, racks in sorted(state.partition_racks.items())
            if tp not in changelogs
        ]
        # the changelogs (Kafka's standby optimisation), described through its topic manager,
        # when their racks are known (streamtasks' standby optimisation is off otherwise)
        if changelogs and all(state.partition_racks.get(tp) for tp in changelogs):
            request["changelogs"] = [
                [[tp.topic, tp.partition] for tp in state.tasks[t].changelog_partitions] for t in tasks
            ]
            request["changelog_racks"] = [
                [tp.topic, tp.partition, sorted(state.partition_racks[tp])] for tp in sorted(changelogs)
            ]
    return request, tasks


def _group_request(group: GroupSubscription) -> dict[str, Any]:
    topics = sorted({t for s in group.members.values() for t in s.topics if t in group.partitions_per_topic})
    counts = group.partitions_per_topic
    existing = {TopicPartition(t, p) for t in topics for p in range(counts[t])}
    return {
        "kind": "partition",
        "topics": {t: group.partitions_per_topic[t] for t in topics},
        "members": [
            {
                "id": member,
                "topics": sorted(set(s.topics)),
                "owned": [
                    [tp.topic, tp.partition] for tp in dict.fromkeys(s.owned_partitions) if tp in existing
                ],
                "generation": s.generation,
            }
            for member, s in sorted(group.members.items())
        ],
    }


def _task_result(state: ApplicationState, tasks: list[TaskId], answer: Mapping[str, Any]) -> KafkaTaskResult:
    by_id = {str(pid): pid for pid in state.clients}
    processes = [
        ProcessAssignment(
            process_id=by_id[c["id"]],
            active=frozenset(tasks[i] for i in c["active"]),
            standby=frozenset(tasks[i] for i in c["standby"]),
        )
        for c in answer["clients"]
    ]
    wanted = min(state.configs.num_standby_replicas, len(state.clients) - 1)
    copies = Counter(t for p in processes for t in p.standby)
    return KafkaTaskResult(
        assignment=TaskAssignment(processes=tuple(processes)),
        followup=bool(answer["followup"]),
        warmups=sum(max(0, n - wanted) for n in copies.values()),
        seconds=tuple(ns / 1e9 for ns in answer["assign_ns"]),
        rack_aware=bool(answer.get("rack_aware", False)),
    )


def _partitions(pairs: Sequence[Sequence[Any]]) -> tuple[TopicPartition, ...]:
    return tuple(sorted(TopicPartition(str(t), int(p)) for t, p in pairs))


def _group_result(answer: Mapping[str, Any]) -> KafkaGroupResult:
    return KafkaGroupResult(
        members={m: _partitions(tps) for m, tps in answer["members"].items()},
        target={m: _partitions(tps) for m, tps in answer["target"].items()},
        seconds=tuple(ns / 1e9 for ns in answer["assign_ns"]),
    )


def run_oracle(
    cases: Sequence[TaskCase | GroupCase],
    *,
    warmup: int = 0,
    repeat: int = 1,
    timeout_s: float = 1800.0,
    jvm_options: Sequence[str] = JVM_OPTIONS,
) -> list[KafkaTaskResult | KafkaGroupResult | KafkaFailure]:
    """Kafka's answers to ``cases``, in order, from one JVM (a :class:`KafkaFailure` where its
    assignor threw). Each case runs ``warmup`` untimed
    times, then ``repeat`` timed times (``seconds``: the assign call alone, each run)."""
    if not cases:
        return []
    program = oracle_program()
    scenarios: list[dict[str, Any]] = []
    orders: list[list[TaskId]] = []
    for case in cases:
        if isinstance(case, TaskCase):
            request, tasks = _task_request(case.state)
            scenarios.append(request)
            orders.append(tasks)
        else:
            scenarios.append(_group_request(case.group))
            orders.append([])
    payload = json.dumps({"warmup": warmup, "repeat": repeat, "scenarios": scenarios}, separators=(",", ":"))
    done = subprocess.run(
        program.command(*jvm_options),
        input=payload.encode(),
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise StreamTasksError(
            f"the Kafka assignor oracle failed (exit {done.returncode}):\n{done.stderr.decode()[-4000:]}"
        )
    answers = json.loads(done.stdout)["results"]
    out: list[KafkaTaskResult | KafkaGroupResult | KafkaFailure] = []
    for case, tasks, answer in zip(cases, orders, answers, strict=True):
        if "error" in answer:
            out.append(KafkaFailure(error=str(answer["error"])))
        elif isinstance(case, TaskCase):
            out.append(_task_result(case.state, tasks, answer))
        else:
            out.append(_group_result(answer))
    return out


def describe_state(state: ApplicationState) -> str:
    """A scenario in a few lines, for failure messages."""
    c = state.configs
    lines = [
        f"configs: num_standby_replicas={c.num_standby_replicas} acceptable_recovery_lag="
        f"{c.acceptable_recovery_lag} max_warmup_replicas={c.max_warmup_replicas}",
        "tasks: "
        + " ".join(f"{t}{'' if s.is_stateful else '(stateless)'}" for t, s in sorted(state.tasks.items())),
    ]
    for pid in sorted(state.clients, key=lambda u: u.int):
        cl = state.clients[pid]
        lags = {str(t): lag for t, lag in sorted(cl.task_lags.items())}
        lines.append(
            f"  process {pid.int} capacity={cl.capacity}"
            f" previous_active={sorted(map(str, cl.previous_active))}"
            f" previous_standby={sorted(map(str, cl.previous_standby))} lags={lags}"
        )
    return "\n".join(lines)


def describe_assignment(assignment: TaskAssignment) -> str:
    return "\n".join(
        f"  process {p.process_id.int} active={sorted(map(str, p.active))}"
        f" standby={sorted(map(str, p.standby))} warmup={sorted(map(str, p.warmup))}"
        for p in assignment.processes
    )


# -- measures ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskQuality:
    """One task assignment, measured.

    ``active_spread``: max minus min actives per thread over the processes; ``replica_spread``:
    the same for every replica (active, standby, warm-up); ``moved``: actives now on a process
    that did not run them before (tasks nobody ran are not counted); ``colocated``: a standby or
    warm-up on the process running the task as active, or two copies on one process (must be 0);
    ``missing_standbys``: copies short of ``min(num_standby_replicas, processes - 1)`` per
    stateful task, counting standbys and warm-ups on other processes than the active's."""

    active_spread: Fraction
    replica_spread: Fraction
    moved: int
    colocated: int
    missing_standbys: int
    warmups: int
    followup: bool


def _spread(loads: Sequence[Fraction]) -> Fraction:
    return max(loads) - min(loads) if loads else Fraction(0)


def task_quality(
    state: ApplicationState,
    assignment: TaskAssignment,
    *,
    warmups: int | None = None,
    followup: bool | None = None,
) -> TaskQuality:
    """Measure ``assignment`` of ``state``; ``warmups`` and ``followup`` default to what the
    assignment itself says (Kafka's answers pass their own)."""
    capacity = {pid: c.capacity for pid, c in state.clients.items()}
    by_pid = {p.process_id: p for p in assignment.processes}
    active_loads, replica_loads = [], []
    for pid, cap in capacity.items():
        p = by_pid.get(pid, ProcessAssignment(process_id=pid))
        active_loads.append(Fraction(len(p.active), cap))
        replica_loads.append(Fraction(len(p.active) + len(p.standby) + len(p.warmup), cap))
    previous: dict[TaskId, set[object]] = {}
    for client in state.clients.values():
        for task in client.previous_active:
            previous.setdefault(task, set()).add(client.process_id)
    moved = sum(
        1 for p in assignment.processes for t in p.active if t in previous and p.process_id not in previous[t]
    )
    holders: dict[TaskId, list[object]] = {}
    owner: dict[TaskId, object] = {}
    for p in assignment.processes:
        for t in p.active:
            owner[t] = p.process_id
        for t in (*p.standby, *p.warmup):
            holders.setdefault(t, []).append(p.process_id)
    colocated = 0
    for t, pids in holders.items():
        colocated += len(pids) - len(set(pids)) + (owner.get(t) in pids)
    wanted = min(state.configs.num_standby_replicas, max(0, len(state.clients) - 1))
    missing = sum(
        max(0, wanted - len(set(holders.get(t, ())) - {owner.get(t)}))
        for t, spec in state.tasks.items()
        if spec.is_stateful
    )
    return TaskQuality(
        active_spread=_spread(active_loads),
        replica_spread=_spread(replica_loads),
        moved=moved,
        colocated=colocated,
        missing_standbys=missing,
        warmups=sum(len(p.warmup) for p in assignment.processes) if warmups is None else warmups,
        followup=assignment.needs_followup if followup is None else followup,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupQuality:
    """One partition assignment, measured.

    ``spread``: max minus min partitions per member once the follow-up rebalance has handed the
    withheld partitions over (the target); ``first_spread``: the same for this round's answer;
    ``moved``: partitions whose target member is not their valid previous owner (KIP-341: the
    highest generation's claim; claims tied at the highest void each other), i.e. what must be
    revoked somewhere; ``withheld``: target partitions not handed out this round."""

    spread: int
    first_spread: int
    moved: int
    withheld: int
    unassigned: int
    followup: bool


def _member_spread(group: GroupSubscription, assignment: Mapping[MemberId, Sequence[TopicPartition]]) -> int:
    sizes = [len(assignment.get(m, ())) for m in group.members]
    return max(sizes) - min(sizes) if sizes else 0


def group_quality(
    group: GroupSubscription,
    members: Mapping[MemberId, Sequence[TopicPartition]],
    target: Mapping[MemberId, Sequence[TopicPartition]],
) -> GroupQuality:
    """Measure a cooperative answer: ``members`` handed out this round, ``target`` after it."""
    valid = cooperative.valid_claims(cooperative.owned_from(group))
    previous = {tp: m for m, tps in valid.items() for tp in tps}
    moved = sum(1 for m, tps in target.items() for tp in tps if tp in previous and previous[tp] != m)
    subscribed = {t for s in group.members.values() for t in s.topics if t in group.partitions_per_topic}
    everything = {TopicPartition(t, p) for t in subscribed for p in range(group.partitions_per_topic[t])}
    targeted = {tp for tps in target.values() for tp in tps}
    withheld = sum(len(set(target.get(m, ())) - set(members.get(m, ()))) for m in group.members)
    return GroupQuality(
        spread=_member_spread(group, target),
        first_spread=_member_spread(group, members),
        moved=moved,
        withheld=withheld,
        unassigned=len(everything - targeted),
        followup=withheld > 0,
    )


def streamtasks_group(group: GroupSubscription) -> tuple[GroupAssignment, GroupAssignment]:
    """streamtasks' ``cooperative_sticky`` on ``group``: (this round under COOPERATIVE, target)."""
    assignor = CooperativeStickyAssignor()
    target = assignor.assign(group)
    handed = cooperative.assign(assignor, group, RebalanceProtocol.COOPERATIVE)
    return handed, target
