"""The live drill's reading of its workers' lines (:class:`streamtasks.drills.rolling._Run`)."""

from __future__ import annotations

from typing import Any

from streamtasks.drills._proc import line_time_ms
from streamtasks.drills.catalog import get_drill
from streamtasks.drills.rolling import DrillOptions, _Run


def test_a_line_is_placed_at_its_own_time_never_after_it_was_read() -> None:
    assert line_time_ms({"t": 1_000}, 50_000, 40_000) == 41_000
    assert line_time_ms({"t": 20_000}, 50_000, 40_000) == 50_000
    assert line_time_ms({"at_ms": 49_000, "wall_ms": 49_500}, 50_000, 0) == 49_000
    assert line_time_ms({"wall_ms": 49_500}, 50_000, 0) == 49_500
    assert line_time_ms({"kind": "progress"}, 50_000, 0) == 50_000


def test_an_eager_revocation_read_after_the_next_generations_assignment_is_no_double_ownership() -> None:
    """A loaded CI run: w2 held partition 2 from generation 7 and revoked it before rejoining
    (eager: the assignors ``cooperative_sticky,range`` share only EAGER) for generation 8, in
    which w1 got it; the harness read w1's lines first, all in one moment."""
    run = _Run(get_drill("eager-to-cooperative"), DrillOptions(workers=2, partitions=4), "127.0.0.1:1", print)
    topic = run.topic
    base = run.t0 - 10_000 - run.mono_offset  # the workers' monotonic clock, 10 s before t0

    def line(kind: str, at: int, generation: int, *partitions: int) -> dict[str, Any]:
        return {
            "kind": kind,
            "generation": generation,
            "partitions": [[topic, p] for p in partitions],
            "t": base + at,
        }

    run.on_line("w2", line("assigned", 5_600, 7, 2))
    run.on_line("w1", line("assigned", 5_614, 7, 3))
    run.on_line("w1", line("revoked", 6_000, 7, 3))
    run.on_line("w1", line("assigned", 6_129, 8, 2, 3))
    run.on_line("w2", line("revoked", 5_900, 7, 2))
    run.on_line("w2", line("assigned", 6_129, 8, 0, 1))
    assert run.ledger.report(run.t0).violations == ()
    assert (2, "w2", -4.4, -4.1) in run.result.ownership  # w2's interval is kept, at its own times
    assert run.ledger.owners()[run.partitions[2]] == "w1"
    # Had w2 revoked only after w1's assignment, it would have been one.
    run.on_line("w1", line("revoked", 7_000, 8, 2))
    run.on_line("w2", line("assigned", 7_100, 9, 2))
    run.on_line("w1", line("assigned", 7_100, 9, 2))
    run.on_line("w2", line("revoked", 7_101, 9, 2))
    (violation,) = run.ledger.report(run.t0).violations
    assert (violation.holder, violation.claimant) == ("w2", "w1")


def test_a_lapsed_assignment_taken_back_is_recorded_said_and_in_the_verdict() -> None:
    """A worker's ``taken_back`` line (:class:`streamtasks.drills.worker.Reporter`) follows its
    ``assigned`` line: the drill records it, says it, and the verdict lists it."""
    from streamtasks.drills.drill_report import verdict_rows
    from streamtasks.drills.ledger import FaultMark

    said: list[str] = []
    run = _Run(get_drill("broker-hang"), DrillOptions(workers=2, partitions=4), "127.0.0.1:1", said.append)
    at = run.t0 - 2_000 - run.mono_offset  # lines are placed at their own time, never later
    back = {"kind": "taken_back", "generation": 4, "partitions": [[run.topic, 0], [run.topic, 1]], "t": at}
    run.on_line("w1", {**back, "kind": "assigned"})
    run.on_line("w1", back)
    assert run.result.taken_back == [(-2.0, "w1", 4, 2)]
    assert said == [
        "  w1 took its lapsed assignment back at -2.0s (generation/epoch 4, 2 partitions, no rebalance)"
    ]
    assert run.ledger.owners()[run.partitions[0]] == "w1"  # the assigned line made it the owner
    run.result.faults.append(FaultMark(label="SIGSTOP node 1", node=1, at_s=2.0, resumed_ms=10_500))
    rows = {a: (b, c) for a, b, c in verdict_rows(run.result)}
    assert rows["lapsed assignments taken back (no rebalance)"] == ("1", "-")
    assert rows["taken back by w1 (at -2.0s)"] == ("generation/epoch 4, 2 partitions", "-")
