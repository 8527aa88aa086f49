"""Where the unowned partition-time of a rolling bounce goes, cause by cause.

    .venv/bin/python benchmarks/unowned.py [--protocols eager,cooperative,consumer,consumer-client]
        [--members 12] [--partitions 24] [--seeds 0-7] [--heartbeat-ms 1000]
        [--followup-heartbeat-ms 100]

Runs the sweep's ``rolling_bounce`` point (no faults, the protocol's default assignor; the
scenario ``streamtasks sweep protocols`` runs, docs/spark.md) for each seed in the simulator
with its whole trace kept, records every stretch a partition had no owner (from the drill's
start, as the sweep's ``unowned_partition_ms``), and splits each stretch at the protocol's
milestones found in the trace:

- classic (eager, cooperative), by why the owner let go: ``a leave`` (the leaving member's
  partitions), ``b follow-up`` (cooperative: revoked by a rebalance, handed out by KIP-429's
  follow-up), ``c revoke-all`` (eager: every member's partitions, revoked when it hears of the
  rebalance); each split into release -> the coordinator's PreparingRebalance, the join
  barrier (the other members' next heartbeat) and the JoinGroup/SyncGroup round trips;
- KIP-848 (consumer, consumer-client): ``d leave`` split into the wait for the member asked to
  compute (client-side), the Prepare/Install round trips, and the new owner's next heartbeat;
  ``d revoke`` from the old owner's release to the new owner's assignment.

The parts of every seed add up to the sweep's figure exactly (checked). Prints partition-s per
membership change (the mean over the seeds), the median of the seeds' totals (the report's
plot), the partitions freed per leave, and the longest stretch.
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import sys
from collections import Counter
from dataclasses import replace
from typing import Any

from _paths import project_imports
from _table import format_table

with project_imports():
    from streamtasks.sim.classic_side import WorldSettings, classic_world
    from streamtasks.sim.kip848 import ConsumerSettings, consumer_world
    from streamtasks.sim.ledger import ReleaseKind
    from streamtasks.sim.world import World
    from streamtasks.sweeps.drills import drill_changes, drill_scenario, drill_start_ms
    from streamtasks.sweeps.grid import ASSIGNORS_BY_PROTOCOL, Point
    from streamtasks.sweeps.metrics import DrillLedger
    from topology.ids import TopicPartition

PROTOCOLS = ("eager", "cooperative", "consumer", "consumer-client")


class StretchLedger(DrillLedger):
    """The sweep's ledger, also keeping each unowned stretch: (start, end, why it began)."""

    def __init__(self, existing: frozenset[TopicPartition], start_ms: int) -> None:
        super().__init__(existing, start_ms)
        self.stretches: list[tuple[int, int, ReleaseKind]] = []
        self._began: dict[TopicPartition, tuple[int, ReleaseKind]] = {}

    def acquire(self, conn: str, **kw: Any) -> None:
        for tp in kw["partitions"]:
            if not self.holders.get(tp) and tp in self._began:
                start, kind = self._began.pop(tp)
                self.stretches.append((start, kw["now_ms"], kind))
        super().acquire(conn, **kw)

    def release(
        self, conn: str, partitions: tuple[TopicPartition, ...], now_ms: int, *a: Any, **kw: Any
    ) -> Any:
        dropped = super().release(conn, partitions, now_ms, *a, **kw)
        kind = a[0] if a else kw["kind"]
        for tp in dropped:
            if not self.holders.get(tp):
                self._began[tp] = (now_ms, kind)
        return dropped

    def still_open(self, now_ms: int) -> list[tuple[int, int, ReleaseKind]]:
        return [(start, now_ms, kind) for start, kind in self._began.values()]


def _times(lines: list[str], needle: str) -> list[int]:
    return [int(line.split()[0]) for line in lines if needle in line]


def _next(times: list[int], at: int, end: int) -> int:
    """The first time in ``times`` at or after ``at``, ``end`` if none before ``end``."""
    i = bisect.bisect_left(times, at)
    return times[i] if i < len(times) and times[i] <= end else end


def _last(times: list[int], at: int, start: int) -> int:
    """The last time in ``times`` at or before ``at``, ``start`` if none after ``start``."""
    i = bisect.bisect_right(times, at)
    return times[i - 1] if i and times[i - 1] >= start else start


def attribute(
    point: Point, seed: int, heartbeat_ms: int | None = None, followup_ms: int | None = None
) -> tuple[Counter[tuple[str, str]], int, int]:
    """(ms per (cause, part), the ledger's total, the longest stretch) for one seed."""
    scenario = drill_scenario(point, seed)
    timeouts = scenario.timeouts
    if heartbeat_ms is not None:
        timeouts = replace(timeouts, heartbeat_ms=heartbeat_ms)
    if followup_ms is not None:
        timeouts = replace(timeouts, followup_heartbeat_ms=followup_ms)
    scenario = replace(scenario, timeouts=timeouts)
    start = drill_start_ms(point.members)
    ledger = StretchLedger(frozenset(), start)
    world: World[Any, Any]
    kip848 = point.protocol in ("consumer", "consumer-client")
    if kip848:
        world = consumer_world(
            scenario,
            point.protocol,
            ConsumerSettings(
                standby_replicas=point.standbys,
                heartbeat_interval_ms=scenario.timeouts.heartbeat_ms,
                max_events=2_000_000,
                trace_limit=10**8,
            ),
            ledger=ledger,
        )
    else:
        world = classic_world(scenario, WorldSettings(max_events=2_000_000, trace_limit=10**8), ledger=ledger)
    result = world.run()
    if result.violations:
        raise SystemExit(f"{point.key} seed {seed}: {result.violations[0]}")
    lines = world.trace.lines()
    parts: Counter[tuple[str, str]] = Counter()
    prepare = _times(lines, "coordinator: preparing rebalance")
    formed = [int(x.split()[0]) for x in lines if "coordinator: generation " in x and "stable" not in x]
    asked = _times(lines, "should_compute_assignment=True")
    installed = _times(lines, "<- InstallAssignmentResponse()")
    longest = 0
    for released, end, kind in ledger.stretches + ledger.still_open(world.now):
        if end <= start:
            continue
        begin = max(released, start)
        longest = max(longest, end - begin)
        left = kind is ReleaseKind.LEFT
        if not kip848:
            revoked = "b follow-up" if point.protocol == "cooperative" else "c revoke-all"
            cause = "a leave" if left else revoked
            # the generation that handed it out, and the rebalance's start (eager members
            # revoke when they hear of a rebalance already under way: no wait before it)
            g = _last(formed, end, begin)
            p = _last(prepare, g, begin)
            parts[(cause, "release -> PreparingRebalance")] += p - begin
            parts[(cause, "join barrier: the members' next heartbeat")] += g - p
            parts[(cause, "JoinGroup/SyncGroup round trips")] += end - g
        elif left and point.protocol == "consumer-client":
            c = _next(asked, begin, end)
            i = _next(installed, c, end)
            parts[("d leave", "the computing member's next heartbeat")] += c - begin
            parts[("d leave", "Prepare/Install round trips")] += i - c
            parts[("d leave", "the new owner's next heartbeat")] += end - i
        elif left:
            parts[("d leave", "the new owner's next heartbeat")] += end - begin
        else:
            parts[("d revoke", "released -> the new owner's next heartbeat")] += end - begin
        parts[("#", "freed by a leave" if left else "revoked")] += 1
    total = ledger.orphan_total_ms(world.now)
    counted = sum(v for k, v in parts.items() if k[0] != "#")
    if counted != total:
        raise AssertionError(f"{point.key} seed {seed}: parts {counted} ms, ledger {total} ms")
    return parts, total, longest


def _seeds(spec: str) -> list[int]:
    if "-" in spec:
        lo, hi = spec.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in spec.split(",")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--protocols", default=",".join(PROTOCOLS))
    ap.add_argument("--members", type=int, default=12)
    ap.add_argument("--partitions", type=int, default=24)
    ap.add_argument("--seeds", default="0-7", help="A-B or a comma list (default 0-7, the protocols grid's)")
    ap.add_argument("--heartbeat-ms", type=int, help="the members' heartbeat interval (default: 1 s)")
    ap.add_argument(
        "--followup-heartbeat-ms",
        type=int,
        help="classic members' MemberConfig.followup_heartbeat_ms (default 100; 0: Kafka's timing)",
    )
    args = ap.parse_args(argv)
    seeds = _seeds(args.seeds)
    rows = []
    for protocol in args.protocols.split(","):
        point = Point(
            protocol=protocol,
            assignor=ASSIGNORS_BY_PROTOCOL[protocol][0],
            members=args.members,
            partitions=args.partitions,
            standbys=0,
            faults="none",
            drill="rolling_bounce",
        )
        changes = drill_changes(point)
        summed: Counter[tuple[str, str]] = Counter()
        totals, longest = [], 0
        for seed in seeds:
            parts, total, long_ms = attribute(point, seed, args.heartbeat_ms, args.followup_heartbeat_ms)
            summed.update(parts)
            totals.append(total / changes / 1000)
            longest = max(longest, long_ms)
        n = len(seeds) * changes
        freed = summed[("#", "freed by a leave")] / n
        rows.append(
            [
                protocol,
                "total",
                f"mean {sum(totals) / len(totals):.3f}, median {statistics.median(totals):.3f}",
                f"freed/leave {freed:.2f}, longest {longest} ms",
            ]
        )
        for (cause, part), ms in sorted(summed.items()):
            if cause != "#":
                rows.append([protocol, cause, part, f"{ms / n / 1000:.3f}"])
    options = f", heartbeat {args.heartbeat_ms} ms" if args.heartbeat_ms else ""
    if args.followup_heartbeat_ms is not None:
        options += f", followup_heartbeat_ms {args.followup_heartbeat_ms}"
    size = f"{args.members} members x {args.partitions} partitions"
    print(f"rolling_bounce, {size}, seeds {args.seeds}{options}")
    print(format_table(["protocol", "cause", "part", "partition-s / change"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
