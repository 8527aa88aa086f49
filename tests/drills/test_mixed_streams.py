"""Kafka Streams 4.4.0's Java word count and streamtasks Apps with its topology in ONE streams
group on the embedded Apache Kafka 4.4.0 (issue 29, item 4): 2 Java + 2 Python members, a
bounce of one of each kind; tasks move between Java and Python processes, state comes back
from the shared changelog, every acknowledged input offset is counted exactly once, the final
counts are right (:mod:`streamtasks.drills.mixed_streams`)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from streamtasks.drills.mixed_streams import MixedResult, run_mixed, write_mixed_report
from streamtasks.embedded import Cluster


@pytest.mark.integration
def test_java_and_python_members_share_one_streams_group_through_a_bounce_of_each_kind(
    ks_kafka: Cluster, tmp_path: Path
) -> None:
    result = asyncio.run(
        run_mixed("mixed-bounce", ks_kafka.bootstrap_servers, say=print, state_root=tmp_path)
    )
    write_mixed_report(result, tmp_path / "report")
    for row in result.rows():
        print(row)
    assert result.errors == []
    assert result.acknowledged == 60 * 6
    assert result.lost == []
    assert result.duplicated == []
    assert result.wrong_changelog == result.wrong_output == 0
    assert result.moved, result.ran_on  # a task ran on a Java and on a Python process in turn
    # A counting task (subtopology 1) handed from one kind to the other restores its state from
    # the shared changelog on the new owner. Which tasks the broker moves is its choice, so each
    # direction is checked when it happened.
    handovers = {
        (before, after)
        for task, kinds in result.ran_on.items()
        if task.startswith("1_")
        for before, after in itertools.pairwise(kinds)
        if before != after
    }
    if ("java", "python") in handovers:
        assert result.python_restored > 0, result.ran_on
    if ("python", "java") in handovers:
        assert result.java_restored > 0, result.ran_on
    assert set(result.topology_epochs) == {0}
    assert result.ok
    assert (tmp_path / "report" / "report.json").exists()


def test_the_verdict_fails_on_a_lost_offset_a_wrong_count_or_no_move(tmp_path: Path) -> None:
    good = MixedResult(drill="d", acknowledged=3, ran_on={"0_0": ["java", "python"], "1_0": ["java"]})
    assert good.moved == ["0_0"]
    assert good.ok
    for bad in (
        dataclasses.replace(good, lost=["0:[4]"]),
        dataclasses.replace(good, duplicated=["1:[2..3]"]),
        dataclasses.replace(good, wrong_output=1),
        dataclasses.replace(good, ran_on={"0_0": ["java"]}),
        dataclasses.replace(good, errors=["java-a: ERROR boom"]),
    ):
        assert not bad.ok
        assert [r for r in bad.rows() if r[2] == "FAIL"]
    page = write_mixed_report(dataclasses.replace(good, steps=["start <java-a>"]), tmp_path)
    assert "&lt;java-a&gt;" in page.read_text()
    assert json.loads((tmp_path / "report.json").read_text())["ok"] is True
