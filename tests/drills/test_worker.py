"""The drill worker's rebalance reports (:class:`streamtasks.drills.worker.Reporter`)."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from streamtasks.drills.worker import TAKEN_BACK, Reporter
from streamtasks.runtime.consumer import Consumer
from topology.ids import TopicPartition


class _Member:
    """What the reporter reads of a consumer: its generation and its metrics."""

    generation = 4

    def __init__(self) -> None:
        self.taken_back = 0.0

    def metrics(self) -> dict[str, float]:
        return {TAKEN_BACK: self.taken_back}


def test_an_assignment_that_takes_a_lapsed_one_back_is_followed_by_a_taken_back_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    member = _Member()
    reporter = Reporter("w1", [cast(Consumer, member)])
    tps = (TopicPartition("t", 0), TopicPartition("t", 1))
    reporter.on_partitions_assigned(tps)  # an ordinary assignment
    member.taken_back = 1.0  # the coordinator vouched for the lapsed epoch
    reporter.on_partitions_assigned(tps)
    reporter.on_partitions_assigned(tps[:1])  # a later, ordinary one
    lines: list[dict[str, Any]] = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["kind"], len(x["partitions"])) for x in lines] == [
        ("assigned", 2),
        ("assigned", 2),
        ("taken_back", 2),
        ("assigned", 1),
    ]
    assert lines[2]["generation"] == 4
