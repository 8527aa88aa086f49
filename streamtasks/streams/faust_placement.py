"""Placing a faust app's actives and standbys with a KIP-924 task assignor (pure).

The leader step of :mod:`streamtasks.faust`'s drop-in assignor. faust groups its topics into
co-partitioned sets (:func:`~streamtasks.streams.faust_assignment.copartitioned_sets`); here
every set is a subtopology and every partition of it a task: ``TaskId(set index, partition)``,
whose source partitions are the set's non-changelog topics at that partition and whose
changelog partitions are its table changelogs (a set with a changelog is stateful).

Each member is a process (its id derived from its faust url), with its previous actives and
standbys as tasks and its task lags from what it reports: per changelog partition the last
offset its tables read and the high watermark it saw. A task's end is the highest watermark any
member saw; its lag on a member is the sum over its changelog partitions of
``end - 1 - offset`` (at least 0); a member without a position for one of them has no lag for
the task (unknown, so not caught up); a member running the task now reports it as running.

The task assignor (the high-availability one by default) then places actives on caught-up
members, standbys lag-aware, and warm-ups where actives should go next; warm-ups are faust
standbys, named in :attr:`FaustPlacement.warmups` so the member can ask for the rebalance that
moves the active once they have caught up. If members subscribe to different topics (the
task assignor needs every member able to run every task), or the task assignor fails, faust's
own algorithm answers instead and the reason is in :attr:`FaustPlacement.problems`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from assignors.types import (
    RUNNING_LAG,
    ApplicationState,
    AssignmentConfigs,
    AssignmentError,
    ClientState,
    TaskAssignment,
    TaskAssignor,
    TaskSpec,
)
from assignors.validate import validate_task_assignment
from streamtasks.errors import StreamTasksError
from streamtasks.streams.faust_assignment import (
    CopartitionedSet,
    FaustMemberInput,
    FaustMemberOutput,
    copartitioned_sets,
    faust_assign,
)
from topology.ids import TaskId, TopicPartition

__all__ = ["FaustMemberState", "FaustPlacement", "place_faust", "process_id_of"]

TopicPartitions = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class FaustMemberState:
    """One member's subscription as the drop-in assignor reads it."""

    topics: tuple[str, ...]
    url: str
    actives: TopicPartitions = field(default_factory=dict)
    standbys: TopicPartitions = field(default_factory=dict)
    #: Last offset read into the member's tables, per changelog partition.
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    #: High watermark the member saw, per changelog partition.
    highwaters: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class FaustPlacement:
    members: Mapping[str, FaustMemberOutput]
    topic_groups: Mapping[str, int]
    #: Per member, the changelog partitions of the warm-up tasks it was given (sorted).
    warmups: Mapping[str, tuple[TopicPartition, ...]] = field(default_factory=dict)
    #: When the task assignor wants the group to rebalance again (its clock), or None.
    followup_rebalance_ms: int | None = None
    problems: tuple[str, ...] = ()


def process_id_of(url: str) -> uuid.UUID:
    """A faust member's process id: stable across restarts of the same worker url."""
    return uuid.uuid5(uuid.NAMESPACE_URL, url)


def _tasks(sets: tuple[CopartitionedSet, ...], changelogs: frozenset[str]) -> list[TaskSpec]:
    specs = []
    for index, cs in enumerate(sets):
        logged = tuple(t for t in cs.topics if t in changelogs)
        sources = tuple(t for t in cs.topics if t not in changelogs) or cs.topics
        for p in range(cs.partitions):
            specs.append(
                TaskSpec(
                    id=TaskId(index, p),
                    is_stateful=bool(logged),
                    source_partitions=tuple(TopicPartition(t, p) for t in sources),
                    changelog_partitions=tuple(TopicPartition(t, p) for t in logged),
                )
            )
    return specs


def _held(state: FaustMemberState, sets: tuple[CopartitionedSet, ...], active: bool) -> frozenset[TaskId]:
    held = state.actives if active else state.standbys
    out: set[TaskId] = set()
    for index, cs in enumerate(sets):
        for topic in cs.topics:
            if held.get(topic):
                out.update(TaskId(index, p) for p in held[topic] if p < cs.partitions)
                break
    return frozenset(out)


def _client(
    state: FaustMemberState,
    specs: list[TaskSpec],
    sets: tuple[CopartitionedSet, ...],
    ends: Mapping[TopicPartition, int],
) -> ClientState:
    previous_active = _held(state, sets, True)
    previous_standby = _held(state, sets, False) - previous_active
    lags: dict[TaskId, int] = {}
    for spec in specs:
        if not spec.is_stateful:
            continue
        if spec.id in previous_active:
            lags[spec.id] = RUNNING_LAG
            continue
        if not all(tp in state.offsets for tp in spec.changelog_partitions):
            continue
        lags[spec.id] = sum(
            max(0, ends.get(tp, 0) - 1 - state.offsets[tp]) for tp in spec.changelog_partitions
        )
    return ClientState(
        process_id=process_id_of(state.url),
        previous_active=previous_active,
        previous_standby=previous_standby,
        task_lags=lags,
    )


def _fallback(
    members: Mapping[str, FaustMemberState], counts: Mapping[str, int], replicas: int, problems: list[str]
) -> FaustPlacement:
    inputs = {
        m: FaustMemberInput(topics=s.topics, actives=s.actives, standbys=s.standbys)
        for m, s in members.items()
    }
    outs, groups = faust_assign(inputs, counts, replicas=replicas)
    return FaustPlacement(members=outs, topic_groups=groups, problems=tuple(problems))


def place_faust(
    members: Mapping[str, FaustMemberState],
    partitions_per_topic: Mapping[str, int],
    *,
    changelog_topics: frozenset[str],
    task_assignor: TaskAssignor,
    configs: AssignmentConfigs,
    now_ms: int,
) -> FaustPlacement:
    """See the module docstring."""
    problems: list[str] = []
    sets = copartitioned_sets({m: s.topics for m, s in members.items()}, partitions_per_topic)
    everyone = tuple(sorted(members))
    replicas = configs.num_standby_replicas
    if any(cs.members != everyone for cs in sets):
        problems.append("members subscribe to different topics: faust's own placement answers")
        return _fallback(members, partitions_per_topic, replicas, problems)
    by_process: dict[uuid.UUID, str] = {}
    for m in everyone:
        pid = process_id_of(members[m].url)
        if pid in by_process:
            problems.append(f"members {by_process[pid]!r} and {m!r} share the url {members[m].url!r}")
            return _fallback(members, partitions_per_topic, replicas, problems)
        by_process[pid] = m
    specs = _tasks(sets, changelog_topics)
    ends: dict[TopicPartition, int] = {}
    for s in members.values():
        for tp, end in s.highwaters.items():
            ends[tp] = max(ends.get(tp, 0), end)
    try:
        state = ApplicationState.build(
            specs, [_client(members[m], specs, sets, ends) for m in everyone], configs, now_ms=now_ms
        )
        result = task_assignor.assign(state)
        error = validate_task_assignment(state, result)
    except (StreamTasksError, ValueError) as exc:
        problems.append(f"task assignor failed ({exc}): faust's own placement answers")
        return _fallback(members, partitions_per_topic, replicas, problems)
    if error is not AssignmentError.NONE:
        problems.append(
            f"task assignor returned an invalid assignment ({error.value}): faust's placement answers"
        )
        return _fallback(members, partitions_per_topic, replicas, problems)
    return _output(result, by_process, sets, specs)


def _output(
    result: TaskAssignment,
    by_process: Mapping[uuid.UUID, str],
    sets: tuple[CopartitionedSet, ...],
    specs: list[TaskSpec],
) -> FaustPlacement:
    changelog_of = {s.id: s.changelog_partitions for s in specs}
    out: dict[str, FaustMemberOutput] = {}
    warmups: dict[str, tuple[TopicPartition, ...]] = {}
    for pa in result.processes:
        member = by_process[pa.process_id]
        actives: dict[str, tuple[int, ...]] = {}
        standbys: dict[str, tuple[int, ...]] = {}
        for index, cs in enumerate(sets):
            act = tuple(sorted(t.partition for t in pa.active if t.subtopology == index))
            stb = tuple(sorted(t.partition for t in pa.standby | pa.warmup if t.subtopology == index))
            for topic in cs.topics:
                actives[topic], standbys[topic] = act, stb
        out[member] = FaustMemberOutput(
            actives=MappingProxyType(actives), standbys=MappingProxyType(standbys)
        )
        warm = set(pa.warmup) | {t for t, target in result.movements.items() if target == pa.process_id}
        warmups[member] = tuple(sorted(tp for t in warm for tp in changelog_of[t]))
    for member in by_process.values():
        out.setdefault(member, FaustMemberOutput(actives={}, standbys={}))
        warmups.setdefault(member, ())
    groups = {t: cs.group_id for cs in sets for t in cs.topics}
    return FaustPlacement(
        members=dict(sorted(out.items())),
        topic_groups=groups,
        warmups=dict(sorted(warmups.items())),
        followup_rebalance_ms=result.followup_rebalance_ms,
    )
