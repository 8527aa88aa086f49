"""One sweep scenario's row: columns, determinism, the drill's own cost, unowned time measured
from the drill's start in both simulators, and exceptions reported as violations."""

from __future__ import annotations

import pytest

from streamtasks.sim.ledger import ReleaseKind
from streamtasks.sweeps.drills import drill_scenario
from streamtasks.sweeps.grid import DIMENSIONS, Point
from streamtasks.sweeps.metrics import COLUMNS, DrillLedger, run_bounce_sample, run_point, simulate
from topology.ids import TopicPartition

ASSIGNOR = {
    "eager": "range",
    "cooperative": "cooperative_sticky",
    "consumer": "uniform",
    "consumer-client": "streams",
}


def _point(protocol: str, drill: str = "rolling_bounce", members: int = 4) -> Point:
    return Point(
        protocol=protocol,
        assignor=ASSIGNOR[protocol],
        members=members,
        partitions=12,
        standbys=0,
        faults="none",
        drill=drill,
    )


@pytest.mark.parametrize("protocol", sorted(ASSIGNOR))
def test_rolling_bounce_row_per_protocol(protocol: str) -> None:
    point = _point(protocol)
    row = run_point(point, 5)
    assert list(row) == [*DIMENSIONS, *(name for name, _ in COLUMNS)]
    assert row["violations"] == 0
    assert row["replay"] == ""
    assert row["membership_changes"] == 4
    # every member left and came back: partitions moved away and rebalances happened
    assert row["rebalances"] >= 4
    assert row["partitions_moved"] > 0
    assert row["rebalances_per_change"] == row["rebalances"] / 4
    assert row["converge_ms"] is not None
    assert 0 < row["longest_unowned_ms"] <= row["unowned_partition_ms"]
    assert (row["coordinator_records"] is None) == (protocol in ("eager", "cooperative"))
    assert run_point(point, 5) == row


def test_bounce_sample_row_is_the_sampled_bounces_cost() -> None:
    point = _point("cooperative", members=6)
    row = run_bounce_sample(point, 1, 2)
    assert list(row) == [*DIMENSIONS, *(name for name, _ in COLUMNS)]
    assert row["violations"] == 0
    assert row["membership_changes"] == 2
    # each sampled bounce moves the bounced member's partitions away and back (cooperative:
    # a leave, a rejoin and its follow-up), nothing else
    assert row["rebalances_per_change"] == row["rebalances"] / 2 >= 2
    assert 0 < row["partitions_moved"] <= 2 * 2 * 2
    assert run_bounce_sample(point, 1, 2) == row


def test_eager_revokes_everything_cooperative_only_what_moves() -> None:
    eager, coop = run_point(_point("eager"), 2), run_point(_point("cooperative"), 2)
    assert eager["partitions_revoked"] > coop["partitions_revoked"]
    assert coop["partitions_revoked"] <= coop["partitions_moved"]


def test_drill_cost_excludes_formation() -> None:
    # a crash of one of four members: at most its partitions move
    row = run_point(_point("cooperative", drill="crash"), 1)
    assert row["membership_changes"] == 1
    assert 0 < row["partitions_moved"] <= 12
    assert row["rebalances"] <= 2


def test_drill_ledger_counts_unowned_time_from_the_drill_start() -> None:
    tp = TopicPartition("t0", 0)
    ledger = DrillLedger(frozenset({tp}), start_ms=1_000)
    ledger.start_measuring(10)  # what the classic world does when the group is first stable: ignored
    ledger.acquire("a#0", name="a", partitions=(tp,), now_ms=400, generation=1, start_offsets={})
    ledger.release("a#0", (tp,), 1_200, ReleaseKind.REVOKED)
    ledger.acquire("b#0", name="b", partitions=(tp,), now_ms=1_500, generation=2, start_offsets={})
    assert ledger.orphan_total_ms(2_000) == 300
    assert ledger.longest_orphan_stretch_ms(2_000) == 300


def test_an_exception_in_the_simulated_parts_is_a_violation_with_a_replay() -> None:
    point = _point("eager", members=2)
    scenario = drill_scenario(point, 0)
    # a step the world cannot apply: a metadata change of a topic the group does not have
    from dataclasses import replace

    from streamtasks.sim.scenario import Step

    broken = replace(
        scenario, steps=(*scenario.steps, Step(at_ms=30_000, op="metadata", topic="nope", partitions=3))
    )
    outcome = simulate(broken, point)
    assert [v.invariant for v in outcome.violations][-1:] == ["no-exception"]
    assert "KeyError" in outcome.violations[-1].detail


@pytest.mark.parametrize(
    ("protocol", "assignor"), [("streams", "sticky"), ("streams-client", "high_availability")]
)
def test_streams_rows_count_tasks_taken_over_and_warm_ones(protocol: str, assignor: str) -> None:
    """A streams group's row: the group epochs, tasks that became active on a process
    (``partitions_moved``), of them the warm ones, the coordinator's records; no partition
    ledger (tasks are not partitions: revoked, lost and unowned time are 0, not measured)."""
    point = Point(
        protocol=protocol,
        assignor=assignor,
        members=4,
        partitions=12,
        standbys=1,
        faults="none",
        drill="rolling_bounce",
    )
    row = run_point(point, 5)
    assert list(row) == [*DIMENSIONS, *(name for name, _ in COLUMNS)]
    assert row["violations"] == 0
    assert row["membership_changes"] == 4
    assert int(str(row["rebalances"])) >= 4
    assert 0 < int(str(row["warm_handovers"])) <= int(str(row["partitions_moved"]))
    assert int(str(row["coordinator_records"])) > 0
    assert row["unowned_partition_ms"] == row["longest_unowned_ms"] == 0
    assert row["partitions_revoked"] == row["partitions_lost"] == 0
    assert run_point(point, 5) == row
