"""One scenario of a sweep: run a point's drill for a seed in the simulator, return its row.

The drill's own cost is the full run's figures less those of the same scenario's formation
(the starts only, run to convergence): rebalances, partitions revoked/moved/lost, unowned
partition-time, restore records, hand-overs and coordinator records are the drill's; events,
simulated time, the longest unowned stretch and convergence are the full run's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamtasks.sim.batch import run_guarded
from streamtasks.sim.classic_side import ClassicSide, RunResult, WorldSettings, classic_world
from streamtasks.sim.kip848 import ConsumerRunResult, ConsumerSettings, ConsumerSide, consumer_world
from streamtasks.sim.ledger import OwnershipLedger
from streamtasks.sim.scenario import Scenario
from streamtasks.sim.streams import StreamsRunResult, StreamsSettings, StreamsSide
from streamtasks.sim.trace import Violation
from streamtasks.sim.world import World
from streamtasks.sweeps.drills import (
    bounce_sample,
    drill_changes,
    drill_scenario,
    drill_start_ms,
    formation,
)
from streamtasks.sweeps.grid import DIMENSIONS, Point
from topology.ids import TopicPartition

__all__ = [
    "COLUMNS",
    "DrillLedger",
    "PROGRESS_EVENTS",
    "Outcome",
    "Progress",
    "replay_command",
    "run_bounce_sample",
    "run_point",
    "simulate",
    "simulate_from_drill_start",
]

#: What any simulator's run returns.
AnyResult = RunResult | ConsumerRunResult | StreamsRunResult

#: A long run's progress display: called with the events so far and the simulated time (ms).
Progress = Callable[[int, int], None]
#: Events between two calls of a :data:`Progress`.
PROGRESS_EVENTS = 1_000

#: Row columns after the grid's dimensions, with their Parquet types.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("seed", "int64"),
    ("violations", "int64"),
    ("violation", "string"),
    ("replay", "string"),
    ("membership_changes", "int64"),
    ("rebalances", "int64"),
    ("rebalances_per_change", "float64"),
    ("partitions_revoked", "int64"),
    ("partitions_moved", "int64"),
    ("partitions_lost", "int64"),
    ("moved_per_change", "float64"),
    ("converge_ms", "int64"),
    ("unowned_partition_ms", "int64"),
    ("unowned_ms_per_change", "float64"),
    ("longest_unowned_ms", "int64"),
    ("warm_handovers", "int64"),
    ("restore_records", "int64"),
    ("coordinator_records", "int64"),
    ("events", "int64"),
    ("sim_ms", "int64"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one world run yields for the row (``records``: ``None`` where the model keeps no log)."""

    violations: tuple[Violation, ...]
    events: int
    sim_ms: int
    converged_after_ms: int | None
    rebalances: int
    revoked: int
    moved: int
    lost: int
    orphan_ms: int
    longest_orphan_ms: int
    warm_handovers: int
    restore_records: int
    records: int | None
    trace: tuple[str, ...]


class DrillLedger(OwnershipLedger):
    """The world's ledger, measuring unowned time from the drill's start for both simulators
    (the classic world would start at its first stable generation, the KIP-848 world never):
    the group forming is not the drill's cost."""

    def __init__(self, existing: frozenset[TopicPartition], start_ms: int) -> None:
        super().__init__()
        self._start_ms = start_ms
        self.set_partitions(existing, 0)

    def start_measuring(self, now_ms: int) -> None:
        """Ignored: measuring starts at the drill's start."""

    def _tick(self, now_ms: int) -> None:
        if not self.measuring and now_ms >= self._start_ms:
            super().start_measuring(self._start_ms)

    def acquire(self, conn: str, **kw: Any) -> None:
        self._tick(kw["now_ms"])
        super().acquire(conn, **kw)

    def release(
        self, conn: str, partitions: tuple[TopicPartition, ...], now_ms: int, *a: Any, **kw: Any
    ) -> Any:
        self._tick(now_ms)
        return super().release(conn, partitions, now_ms, *a, **kw)

    def set_partitions(self, partitions: frozenset[TopicPartition], now_ms: int) -> None:
        self._tick(now_ms)
        super().set_partitions(partitions, now_ms)

    def orphan_total_ms(self, now_ms: int) -> int:
        self._tick(now_ms)
        return super().orphan_total_ms(now_ms)

    def longest_orphan_stretch_ms(self, now_ms: int) -> int:
        self._tick(now_ms)
        return super().longest_orphan_stretch_ms(now_ms)


def _max_events(point: Point) -> int:
    rounds = 2 if point.drill == "upgrade" else 1
    return 400_000 + 60 * point.members * (point.members + 10) * rounds


def simulate(scenario: Scenario, point: Point) -> Outcome:
    """Run ``scenario`` in the point's simulator; an exception from the simulated parts is a
    ``no-exception`` violation (as ``streamtasks sim`` reports it)."""
    return _simulate(scenario, point, mark_drill_start=False)[0]


def simulate_from_drill_start(
    scenario: Scenario, point: Point, progress: Progress | None = None
) -> tuple[Outcome, Outcome]:
    """:func:`simulate`, and the same run's figures at the drill's start (before its first
    event at or after :func:`~streamtasks.sweeps.drills.drill_start_ms`; the whole run's if it
    ended before): the formation's figures without simulating the formation a second time.
    ``progress(events, now_ms)`` is called every :data:`PROGRESS_EVENTS` events."""
    full, start = _simulate(scenario, point, mark_drill_start=True, progress=progress)
    return full, start or full


def _simulate(
    scenario: Scenario, point: Point, *, mark_drill_start: bool, progress: Progress | None = None
) -> tuple[Outcome, Outcome | None]:
    start_ms = drill_start_ms(point.members)
    # unowned time counts from the drill's start: the group forming is not the drill's cost
    ledger = DrillLedger(frozenset(), start_ms)
    world = _world(scenario, point, ledger)
    if progress is not None:
        world.watch(PROGRESS_EVENTS, progress)
    at_start: list[Outcome] = []
    if mark_drill_start:
        # the ledger's unowned time is the drill's already (measured from its start)
        world.mark(
            start_ms,
            lambda: at_start.append(
                _figures(
                    world, violations=(), converged_after_ms=None, orphan_ms=0, longest_orphan_ms=0, trace=()
                )
            ),
        )
    # an exception from the simulated parts is a no-exception violation; the sweep goes on
    result = run_guarded(world)
    full = _figures(
        world,
        violations=result.violations,
        converged_after_ms=result.converged_after_ms,
        orphan_ms=world.ledger.orphan_total_ms(world.now),
        longest_orphan_ms=world.ledger.longest_orphan_stretch_ms(world.now),
        trace=result.trace,
    )
    return full, (at_start[0] if at_start else None)


def _world(scenario: Scenario, point: Point, ledger: DrillLedger) -> World[Any, AnyResult]:
    """The point's simulator, on ``ledger`` (a streams world keeps tasks, not partitions: its
    ledger stays empty, its figures come from the side)."""
    if point.protocol in ("streams", "streams-client"):
        settings = StreamsSettings(
            standby_replicas=point.standbys,
            max_events=_max_events(point),
            heartbeat_interval_ms=scenario.timeouts.heartbeat_ms,
        )
        return World(
            scenario, settings, lambda host: StreamsSide(host, point.protocol, settings), ledger=ledger
        )
    if point.protocol in ("consumer", "consumer-client"):
        return consumer_world(
            scenario,
            point.protocol,
            ConsumerSettings(
                standby_replicas=point.standbys,
                max_events=_max_events(point),
                heartbeat_interval_ms=scenario.timeouts.heartbeat_ms,
            ),
            ledger=ledger,
        )
    return classic_world(scenario, WorldSettings(max_events=_max_events(point)), ledger=ledger)


def _figures(world: World[Any, Any], **run: Any) -> Outcome:
    """The world's counters now, with ``run``'s fields (violations, convergence, unowned time)."""
    ledger = world.ledger
    side = world.side
    records: int | None = None
    if isinstance(side, StreamsSide):
        return _streams_figures(world, side, **run)
    if isinstance(side, ConsumerSide):
        group = side.group()
        rebalances = 0 if group is None else int(group.group_epoch)
        records = len(side.log)
    else:
        assert isinstance(side, ClassicSide)
        rebalances = side.coordinator.rebalances
    return Outcome(
        events=world.events,
        sim_ms=world.now,
        rebalances=rebalances,
        revoked=ledger.revoked,
        moved=ledger.moved,
        lost=ledger.lost,
        warm_handovers=ledger.warm_handovers,
        restore_records=ledger.restore_records,
        records=records,
        **run,
    )


def _streams_figures(world: World[Any, Any], side: StreamsSide, **run: Any) -> Outcome:
    """A streams world's counters: group epochs for rebalances, tasks that became active on a
    process for ``moved`` (of them the warm ones for ``warm_handovers``), no revoked / lost
    partitions, restore records or unowned time (tasks are not partitions: the world's ledger
    sees no owner, its unowned time is not the group's; 0 here, not measured)."""
    run = run | {"orphan_ms": 0, "longest_orphan_ms": 0}
    group = side.coordinator.group(side.settings.group_id)
    procs = list(world.host.procs.values())
    return Outcome(
        events=world.events,
        sim_ms=world.now,
        rebalances=0 if group is None else group.epoch,
        revoked=0,
        moved=sum(p.took_over for p in procs),
        lost=0,
        warm_handovers=sum(p.took_over_warm for p in procs),
        restore_records=0,
        records=len(side.log),
        **run,
    )


def replay_command(point: Point, seed: int) -> str:
    return f"streamtasks sweep replay {point.key} --seed {seed}"


def run_point(point: Point, seed: int) -> dict[str, object]:
    """The row of one scenario: the point's dimensions, then :data:`COLUMNS`."""
    return _row(point, seed, drill_scenario(point, seed), drill_changes(point))


def run_bounce_sample(
    point: Point, seed: int, sample: int, *, heartbeat_ms: int | None = None, progress: Progress | None = None
) -> dict[str, object]:
    """The row of a rolling bounce of ``sample`` members of the point's group (drawn by the
    seed; :func:`~streamtasks.sweeps.drills.bounce_sample`, which takes ``heartbeat_ms``): its
    figures are those ``sample`` bounces', ``membership_changes`` is ``sample``; ``replay``
    names the call that runs it again. The formation's figures are the run's own at the drill's
    start (:func:`simulate_from_drill_start`): a large group's formation is simulated once.
    ``progress(events, now_ms)``: called every :data:`PROGRESS_EVENTS` events of the run."""
    option = "" if heartbeat_ms is None else f", heartbeat_ms={heartbeat_ms}"
    replay = f"run_bounce_sample(parse_point({point.key!r}), {seed}, {sample}{option})"
    scenario = bounce_sample(point, seed, sample, heartbeat_ms=heartbeat_ms)
    return _row(point, seed, scenario, sample, replay, formation_again=False, progress=progress)


def _row(
    point: Point,
    seed: int,
    scenario: Scenario,
    changes: int,
    replay: str | None = None,
    *,
    formation_again: bool = True,
    progress: Progress | None = None,
) -> dict[str, object]:
    if formation_again:
        full = simulate(scenario, point)
        base = simulate(formation(scenario, point), point)
    else:
        full, base = simulate_from_drill_start(scenario, point, progress)
    rebalances = full.rebalances - base.rebalances
    moved = full.moved - base.moved
    orphan_ms = full.orphan_ms - base.orphan_ms
    first = full.violations[0] if full.violations else None
    row: dict[str, object] = {d: getattr(point, d) for d in DIMENSIONS}
    row.update(
        seed=seed,
        violations=len(full.violations),
        violation="" if first is None else f"{first.invariant} at {first.time_ms} ms: {first.detail}"[:500],
        replay="" if first is None else replay or replay_command(point, seed),
        membership_changes=changes,
        rebalances=rebalances,
        rebalances_per_change=rebalances / changes,
        partitions_revoked=full.revoked - base.revoked,
        partitions_moved=moved,
        partitions_lost=full.lost - base.lost,
        moved_per_change=moved / changes,
        converge_ms=full.converged_after_ms,
        unowned_partition_ms=orphan_ms,
        unowned_ms_per_change=orphan_ms / changes,
        longest_unowned_ms=full.longest_orphan_ms,
        warm_handovers=full.warm_handovers - base.warm_handovers,
        restore_records=full.restore_records - base.restore_records,
        coordinator_records=None
        if full.records is None or base.records is None
        else full.records - base.records,
        events=full.events,
        sim_ms=full.sim_ms,
    )
    return row
