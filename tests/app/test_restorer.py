"""The Restorer on a real task set: restoring tasks' source partitions held, restores finished
with their event, changelog positions past gaps, end offsets kept for the leader, lags read.

The changelog reader is a stand-in with the members the restorer uses (the reader itself is
tested in ``test_changelog.py`` and live); the consumer is a stand-in for its pause/resume.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from streamtasks.app import AppEvent, ProcessorContext, Record, RestoreCompleted
from streamtasks.app.restorer import Restorer
from streamtasks.app.task import StreamTask
from streamtasks.app.tasks import TaskSet
from streamtasks.errors import BrokerError
from streamtasks.protocol.userdata import AssignmentInfo
from streamtasks.state import INT64, STRING, StateDirectory
from topology import TaskId, TopicPartition, TopologyBuilder

TEXT = "text"
WORDS = "wc-words-repartition"
CHANGELOG = "wc-counts-changelog"


def cl(p: int) -> TopicPartition:
    return TopicPartition(CHANGELOG, p)


def words(p: int) -> TopicPartition:
    return TopicPartition(WORDS, p)


def noop(ctx: ProcessorContext, record: Record) -> None:
    return None


class _Reader:
    def __init__(self) -> None:
        self.ends: dict[TopicPartition, int] = {}
        self.owners: dict[TopicPartition, StreamTask] = {}
        self.fetch_positions: dict[TopicPartition, int] = {}
        self.fail = False

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        if self.fail:
            raise BrokerError("no broker")
        return {tp: self.ends.get(tp, 0) for tp in sorted(set(partitions))}

    def track(self, tasks: Iterable[StreamTask]) -> None:
        self.owners = {tp: t for t in tasks for tp in t.changelog_partitions}

    @property
    def tracked(self) -> Mapping[TopicPartition, StreamTask]:
        return self.owners

    def apply(self, batch: Mapping[TopicPartition, list[Any]]) -> int:
        return 0

    async def positions(self) -> dict[TopicPartition, int]:
        return {tp: self.fetch_positions.get(tp, 0) for tp in self.owners}


class _Source:
    def __init__(self, owned: Iterable[TopicPartition]) -> None:
        self.owned = frozenset(owned)
        self.paused: set[TopicPartition] = set()

    def assignment(self) -> frozenset[TopicPartition]:
        return self.owned

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self.paused.update(partitions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.paused.difference_update(partitions)


class Fixture:
    def __init__(self, tmp_path: Path) -> None:
        builder = TopologyBuilder("wc")
        builder.stream(TEXT).repartition("words").store("counts")
        self.topology = builder.build()
        self.events: list[AppEvent] = []
        self.tasks = TaskSet(
            self.topology,
            {0: noop, 1: noop},
            directory=StateDirectory(tmp_path, "wc"),
            store_serdes={"counts": (STRING, INT64)},
            emit=self.events.append,
        )
        self.tasks.set_partition_counts(self.topology.partition_counts({TEXT: 2}))
        self.reader = _Reader()
        self.restorer = Restorer(
            self.reader,  # type: ignore[arg-type]
            self.tasks,
            topics=self.topology.subscribed_topics(),
            emit=self.events.append,
        )

    def assign(self, owned: Iterable[TopicPartition], *, standby: Iterable[str] = ()) -> _Source:
        info = AssignmentInfo(standby_tasks=frozenset(TaskId.parse(s) for s in standby))
        owned = tuple(owned)
        asyncio.run(self.tasks.reconcile(owned, info, self.restorer.end_offsets))
        source = _Source(owned)
        self.restorer.sync(source)
        return source


@pytest.fixture
def fx(tmp_path: Path) -> Fixture:
    return Fixture(tmp_path)


def test_a_restoring_task_holds_its_source_partition_until_its_changelog_is_read(fx: Fixture) -> None:
    fx.reader.ends = {cl(0): 3}
    source = fx.assign([words(0), words(1)])
    assert source.paused == {words(0), words(1)}  # both restore from their checkpoints
    fx.restorer.finish_restores(source)  # words(1)'s changelog is empty: nothing to restore
    assert [e.task for e in fx.events if isinstance(e, RestoreCompleted)] == [TaskId(1, 1)]
    assert source.paused == {words(0)}
    assert set(fx.reader.tracked) == {cl(0)}
    fx.reader.fetch_positions = {cl(0): 3}  # past a compacted gap: no records, position moved
    asyncio.run(fx.restorer.apply({}, source))
    assert source.paused == set()
    assert fx.reader.tracked == {}
    assert [e.task for e in fx.events if isinstance(e, RestoreCompleted)] == [TaskId(1, 1), TaskId(1, 0)]


def test_end_offsets_are_kept_for_the_leader_and_lags_read_for_standbys(fx: Fixture) -> None:
    assert fx.restorer.cached_end_offsets() == {}
    fx.reader.ends = {cl(0): 5, cl(1): 7}
    fx.assign([words(0)], standby=["1_1"])
    assert asyncio.run(fx.restorer.read_lags()) == {TaskId(1, 1): 7}
    assert fx.restorer.cached_end_offsets() == {cl(0): 5, cl(1): 7}
    fx.reader.fail = True
    with pytest.raises(BrokerError):
        asyncio.run(fx.restorer.read_lags())
    assert fx.restorer.cached_end_offsets() == {cl(0): 5, cl(1): 7}  # kept as last listed
