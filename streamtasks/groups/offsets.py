"""A group's offsets as ``streamtasks groups describe --offsets`` shows them and what
``reset-offsets`` would commit (pure: no IO).

Per partition: the committed offset, the log end offset and the lag (end - committed; the whole
log end when nothing is committed), with the member that owns it; for an App group also the
task (``<subtopology>_<partition>``) the partition feeds, and the lag summed per task. A
partition's task is the owner's active task of that partition number when exactly one
matches (tasks of several subtopologies on one member with the same partition number leave
the task unknown, ``-``: the group's answer has no topology to tell them apart).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streamtasks.errors import ConfigError
from streamtasks.groups.view import ClassicGroupView, table
from topology.ids import TopicPartition

__all__ = [
    "OffsetRow",
    "ResetPlan",
    "ResetSpec",
    "offset_rows",
    "owners_of",
    "parse_datetime_ms",
    "plan_reset",
    "render_offsets",
    "render_reset",
    "task_lags",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetRow:
    partition: TopicPartition
    committed: int | None
    end: int
    lag: int
    owner: str | None
    task: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.partition.topic,
            "partition": self.partition.partition,
            "committed_offset": self.committed,
            "log_end_offset": self.end,
            "lag": self.lag,
            "owner": self.owner,
            "task": self.task,
        }


def owners_of(view: ClassicGroupView) -> tuple[dict[TopicPartition, str], dict[TopicPartition, str]]:
    """Each assigned partition's owner (client id) and, for an App group, its task."""
    owners: dict[TopicPartition, str] = {}
    tasks: dict[TopicPartition, str] = {}
    for m in view.members:
        for tp in m.partitions:
            owners[tp] = m.client_id
            if m.tasks is None:
                continue
            matching = [t for t in m.tasks.active if t.partition == tp.partition]
            if len(matching) == 1:
                tasks[tp] = str(matching[0])
    return owners, tasks


def offset_rows(
    committed: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    owners: Mapping[TopicPartition, str],
    tasks: Mapping[TopicPartition, str],
) -> tuple[OffsetRow, ...]:
    """One row per partition that is committed or owned (its end offset known)."""
    rows = []
    for tp in sorted(set(committed) | set(owners)):
        end = ends.get(tp, -1)
        done = committed.get(tp)
        rows.append(
            OffsetRow(
                partition=tp,
                committed=done,
                end=end,
                lag=max(0, end - (done if done is not None else 0)),
                owner=owners.get(tp),
                task=tasks.get(tp),
            )
        )
    return tuple(rows)


def task_lags(rows: Iterable[OffsetRow]) -> dict[str, int]:
    """The lag summed over each task's partitions (rows with a task only)."""
    found: dict[str, int] = {}
    for r in rows:
        if r.task is not None:
            found[r.task] = found.get(r.task, 0) + r.lag
    return dict(sorted(found.items()))


def render_offsets(rows: Iterable[OffsetRow]) -> str:
    rows = tuple(rows)
    if not rows:
        return "no committed or assigned partitions"
    return table(
        ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "OWNER", "TASK"),
        [
            (r.partition.topic, str(r.partition.partition), "-" if r.committed is None else str(r.committed),
             str(r.end), str(r.lag), r.owner or "-", r.task or "-")
            for r in rows
        ],
    )  # fmt: skip


# -- reset-offsets ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetSpec:
    """Exactly one of: ``to`` ("earliest", "latest", "offset", "datetime") with ``value`` (the
    offset, or the time in epoch ms), or ``to="shift"`` with ``value`` the shift."""

    to: str
    value: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetPlan:
    group_id: str
    #: (partition, current committed offset or None, new offset)
    moves: tuple[tuple[TopicPartition, int | None, int], ...]

    def offsets(self) -> dict[TopicPartition, int]:
        return {tp: new for tp, _, new in self.moves}

    def to_json(self, *, executed: bool) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "executed": executed,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "current_offset": old, "new_offset": new}
                for tp, old, new in self.moves
            ],
        }


def parse_datetime_ms(text: str) -> int:
    """Epoch milliseconds of an ISO-8601 time (UTC when it names no zone)."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"--to-datetime: not an ISO-8601 time: {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def plan_reset(
    group_id: str,
    spec: ResetSpec,
    *,
    partitions: Iterable[TopicPartition],
    committed: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    at_time: Mapping[TopicPartition, int] | None = None,
) -> ResetPlan:
    """The new offset of each partition, clamped to [earliest, latest] as kafka-consumer-groups
    does (a time past the last record goes to the log end)."""
    moves = []
    for tp in sorted(set(partitions)):
        low, high = earliest[tp], latest[tp]
        old = committed.get(tp)
        if spec.to == "earliest":
            new = low
        elif spec.to == "latest":
            new = high
        elif spec.to == "offset":
            new = spec.value
        elif spec.to == "shift":
            new = (old if old is not None else high) + spec.value
        elif spec.to == "datetime":
            found = (at_time or {}).get(tp, -1)
            new = high if found < 0 else found
        else:
            raise ConfigError(f"reset-offsets: unknown target {spec.to!r}")
        moves.append((tp, old, min(max(new, low), high)))
    return ResetPlan(group_id=group_id, moves=tuple(moves))


def render_reset(plan: ResetPlan, *, executed: bool) -> str:
    head = f"group {plan.group_id}: " + ("offsets reset" if executed else "dry run (add --execute to commit)")
    rows = [
        (tp.topic, str(tp.partition), "-" if old is None else str(old), str(new))
        for tp, old, new in plan.moves
    ]
    return head + "\n" + table(("TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"), rows)
