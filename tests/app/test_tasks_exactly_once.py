"""TaskSet under exactly-once: an active task's checkpoint never vouches for uncommitted writes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path

import pytest

from streamtasks.app import TaskClosed
from streamtasks.app.tasks import TaskSet
from streamtasks.state import INT64, STRING, StateDirectory
from tests.app.test_tasks import APP, TEXT, Fixture, cl, consumer_record, count, running, split, words
from tests.ids import task as t


class EosFixture(Fixture):
    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.tasks = TaskSet(
            self.topology,
            {0: split, 1: count},
            directory=StateDirectory(tmp_path, APP),
            store_serdes={"counts": (STRING, INT64)},
            emit=self.events.append,
            exactly_once=True,
        )
        self.tasks.set_partition_counts(self.topology.partition_counts({TEXT: 4}))


@pytest.fixture
def eos(tmp_path: Path) -> Iterable[EosFixture]:
    fixture = EosFixture(tmp_path)
    yield fixture
    fixture.close()


def test_an_active_task_checkpoint_is_removed_once_read_and_not_written_on_commit(eos: EosFixture) -> None:
    eos.directory.write_checkpoint(t("1_0"), {cl(0): 0})
    running(eos, [words(0)])
    assert eos.directory.read_checkpoint(t("1_0")) is None  # read, then removed
    asyncio.run(eos.tasks.process({words(0): [consumer_record(words(0), 0, b"a", b"1")]}))
    eos.tasks.tasks[t("1_0")].acknowledged(cl(0), 0)
    eos.tasks.checkpoint_all()  # a commit: actives keep no checkpoint
    assert eos.directory.read_checkpoint(t("1_0")) is None
    asyncio.run(eos.tasks.close_all(clean=True))  # a clean close after the last commit writes it
    assert eos.directory.read_checkpoint(t("1_0")) == {cl(0): 1}


def test_standbys_still_checkpoint_on_commit(eos: EosFixture) -> None:
    eos.reconcile([], standby=["1_1"])
    eos.tasks.checkpoint_all()
    assert eos.directory.read_checkpoint(t("1_1")) == {cl(1): 0}


def test_after_an_abort_active_tasks_close_dirty_and_come_back_from_the_changelog(
    eos: EosFixture, caplog: pytest.LogCaptureFixture
) -> None:
    running(eos, [words(0)])
    eos.reconcile([words(0)], standby=["1_1"])
    asyncio.run(eos.tasks.process({words(0): [consumer_record(words(0), 0, b"a", b"1")]}))
    assert eos.tasks.committable([words(0)]) == {words(0): 1}
    before = len(eos.events)
    eos.tasks.close_actives_dirty()
    closed = [e for e in eos.events[before:] if isinstance(e, TaskClosed)]
    assert [(str(e.task), e.clean) for e in closed] == [("1_0", False)]
    assert set(eos.tasks.tasks) == {t("1_1")}  # the standby stays
    assert eos.tasks.committable([words(0)]) == {}  # nothing processed survives the abort
    with caplog.at_level(logging.WARNING, logger="streamtasks.app.task"):
        eos.reconcile([words(0)], standby=["1_1"])
    back = eos.tasks.tasks[t("1_0")]
    assert back.typed["counts"].get("a") is None  # the aborted count did not survive locally
    assert any("without a checkpoint" in r.getMessage() for r in caplog.records)
