from __future__ import annotations

import pytest

from streamtasks.app.restore_progress import RestoreProgress
from topology.ids import TopicPartition

A = TopicPartition("app-s-changelog", 0)
B = TopicPartition("app-s-changelog", 1)


def test_a_new_progress_is_not_restoring_and_done() -> None:
    progress = RestoreProgress()
    assert (progress.target, progress.records, progress.started_ms) == (None, 0, None)
    assert progress.done({})


def test_start_count_and_finish_report_records_and_duration() -> None:
    progress = RestoreProgress()
    progress.start({A: 5, B: 0}, now_ms=1_000)
    assert progress.target == {A: 5, B: 0}
    assert not progress.done({A: 4})
    progress.count(3)
    progress.count(1)
    assert progress.done({A: 5})  # B's target is 0: nothing to read
    assert progress.finish(now_ms=1_250) == (4, 250)
    assert progress.target is None
    assert progress.records == 4  # kept for whoever reads it after the restore
    assert progress.done({})


def test_a_restart_counts_from_zero_and_the_target_cannot_be_changed_from_outside() -> None:
    progress = RestoreProgress()
    progress.start({A: 2}, now_ms=10)
    progress.count(2)
    progress.start({A: 9}, now_ms=20)
    assert (progress.records, progress.started_ms) == (0, 20)
    target = progress.target
    assert target is not None
    with pytest.raises(TypeError):
        target[A] = 0  # type: ignore[index]


def test_stop_leaves_the_count_and_ends_the_restore() -> None:
    progress = RestoreProgress()
    progress.start({A: 2}, now_ms=0)
    progress.count(1)
    progress.stop()
    assert (progress.target, progress.records) == (None, 1)
    assert progress.done({})
