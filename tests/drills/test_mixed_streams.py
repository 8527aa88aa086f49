"""Kafka Streams 4.4.0's Java word count and streamtasks Apps with its topology in ONE streams
group on the embedded Apache Kafka 4.4.0 (issue 29, item 4): 2 Java + 2 Python members, a
bounce of one of each kind; tasks move between Java and Python processes, state comes back
from the shared changelog, every acknowledged input offset is counted exactly once, the final
counts are right (:mod:`streamtasks.drills.mixed_streams`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from streamtasks.drills.mixed_streams import run_mixed, write_mixed_report
from streamtasks.embedded import Cluster

pytestmark = pytest.mark.integration


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
    assert result.java_restored > 0  # a moved counting task restored from the shared changelog
    assert result.python_restored > 0
    assert set(result.topology_epochs) == {0}
    assert result.ok
    assert (tmp_path / "report" / "report.json").exists()
