"""Drill scenarios: a point of the grid and a seed become a simulator :class:`Scenario`.

Every drill starts ``members`` processes within the first two seconds, lets the group form
until :func:`drill_start_ms`, then runs its script; the seed draws the start times, down times,
link delays and, with a fault profile, when and where each fault strikes during the drill.

- ``rolling_bounce``: each member in turn leaves (a clean shutdown) and restarts 1-5 s later;
  one bounce every :data:`BOUNCE_INTERVAL_MS`.
- ``scale_out``: half as many members again (at least one) join, one per interval.
- ``crash``: a tenth of the members (at least one) crash at once and stay down (the session
  timeout removes them).
- ``upgrade`` (eager only): KIP-429's two rolling bounces, first to
  ``[cooperative_sticky, <assignor>]`` (still eager), then to ``[cooperative_sticky]``.

:func:`formation` is the same scenario without the drill's steps: the sweep subtracts its
figures to report the drill's own cost.
"""

from __future__ import annotations

import random
from dataclasses import replace

from assignors.partition.types import RebalanceProtocol
from streamtasks.sim.network import LinkProfile
from streamtasks.sim.scenario import Scenario, Step
from streamtasks.sweeps.grid import Point

__all__ = [
    "BOUNCE_INTERVAL_MS",
    "TOPIC",
    "bounce_sample",
    "drill_changes",
    "drill_scenario",
    "drill_start_ms",
    "formation",
    "sim_assignors",
]

#: One bounce (or join) every this many ms: long enough for a member to be back in the group.
BOUNCE_INTERVAL_MS = 12_000
TOPIC = "t0"


def drill_start_ms(members: int) -> int:
    """When the drill begins: the group has formed (its first rebalance done) by then."""
    return 20_000 + 20 * members


def sim_assignors(point: Point) -> tuple[str, ...]:
    """The classic member's assignor list for a point (KIP-848 points name their mode)."""
    if point.protocol in ("consumer", "consumer-client", "streams", "streams-client"):
        return (point.protocol,)
    if point.protocol == "eager" and point.assignor == "cooperative_sticky":
        return ("cooperative_sticky", "range")  # KIP-429: still EAGER while range is listed
    return (point.assignor,)


def drill_changes(point: Point) -> int:
    """Membership changes the drill makes (a bounce counts once)."""
    n = point.members
    return {
        "rolling_bounce": n,
        "scale_out": max(1, n // 2),
        "crash": max(1, n // 10),
        "upgrade": 2 * n,
    }[point.drill]


def _name(i: int) -> str:
    return f"m{i}"


def drill_scenario(point: Point, seed: int) -> Scenario:
    rng = random.Random(f"sweep-{point.key}-{seed}")
    n = point.members
    steps = [Step(at_ms=rng.randint(0, 2_000), op="start", member=_name(i)) for i in range(n)]
    t0 = drill_start_ms(n)
    drill: list[Step] = []
    if point.drill in ("rolling_bounce", "upgrade"):
        rounds = (
            [("cooperative_sticky", point.assignor), ("cooperative_sticky",)]
            if point.drill == "upgrade"
            else [()]
        )
        at = t0
        for assignors in rounds:
            for i in range(n):
                drill.append(Step(at_ms=at, op="leave", member=_name(i)))
                down = rng.randint(1_000, 5_000)
                drill.append(Step(at_ms=at + down, op="restart", member=_name(i), assignors=assignors))
                at += BOUNCE_INTERVAL_MS
    elif point.drill == "scale_out":
        for j in range(max(1, n // 2)):
            drill.append(Step(at_ms=t0 + j * BOUNCE_INTERVAL_MS, op="start", member=_name(n + j)))
    elif point.drill == "crash":
        for i in sorted(rng.sample(range(n), max(1, n // 10))):
            drill.append(Step(at_ms=t0, op="crash", member=_name(i)))
    else:  # pragma: no cover - the grid's Literal admits no other drill
        raise AssertionError(point.drill)
    end = max(s.at_ms for s in drill)
    drill += _faults(rng, point, t0, max(end, t0 + BOUNCE_INTERVAL_MS))
    return _scenario(point, seed, steps + drill, rng)


def _scenario(point: Point, seed: int, steps: list[Step], rng: random.Random) -> Scenario:
    return Scenario(
        seed=seed,
        protocol=RebalanceProtocol.EAGER if point.protocol == "eager" else RebalanceProtocol.COOPERATIVE,
        topics=((TOPIC, point.partitions),),
        assignors=sim_assignors(point),
        steps=tuple(sorted(steps, key=lambda s: s.at_ms)),
        link=LinkProfile(min_delay_ms=1, max_delay_ms=rng.choice((2, 5, 20))),
    )


def bounce_sample(point: Point, seed: int, sample: int, *, heartbeat_ms: int | None = None) -> Scenario:
    """A ``rolling_bounce`` point's scenario with only ``sample`` of its members bounced: the
    same starts, the same drill start and one bounce every :data:`BOUNCE_INTERVAL_MS`, the
    bounced members (and their down times) drawn by the seed, bounced in member order. What a
    bounce costs in a group too large to bounce every member of (docs/spark.md).
    ``heartbeat_ms``: the members' heartbeat interval (the KIP-848 coordinator's too) instead
    of the simulator's 1 s (Kafka's defaults: 3 s classic, 5 s KIP-848)."""
    if point.drill != "rolling_bounce" or point.faults != "none":
        raise ValueError(f"a bounce sample takes a rolling_bounce point without faults, not {point.key}")
    if not 1 <= sample <= point.members:
        raise ValueError(f"a bounce sample of {sample} members out of {point.members}")
    rng = random.Random(f"sweep-sample-{point.key}-{seed}")
    n = point.members
    steps = [Step(at_ms=rng.randint(0, 2_000), op="start", member=_name(i)) for i in range(n)]
    at = drill_start_ms(n)
    for i in sorted(rng.sample(range(n), sample)):
        steps.append(Step(at_ms=at, op="leave", member=_name(i)))
        steps.append(Step(at_ms=at + rng.randint(1_000, 5_000), op="restart", member=_name(i)))
        at += BOUNCE_INTERVAL_MS
    scenario = _scenario(point, seed, steps, rng)
    if heartbeat_ms is None:
        return scenario
    return replace(scenario, timeouts=replace(scenario.timeouts, heartbeat_ms=heartbeat_ms))


def formation(scenario: Scenario, point: Point) -> Scenario:
    """The scenario's steps before the drill starts (the group forming), without the drill's."""
    t0 = drill_start_ms(point.members)
    return replace(scenario, steps=tuple(s for s in scenario.steps if s.at_ms < t0))


def _faults(rng: random.Random, point: Point, start: int, end: int) -> list[Step]:
    """One fault of each kind in the profile, at a drawn time of the drill."""
    out = []
    kinds = point.fault_kinds()
    members = [_name(i) for i in range(point.members)]
    if kinds & {"loss", "dup"}:
        out.append(
            Step(
                at_ms=rng.randint(start, end),
                op="degrade",
                duration_ms=rng.randint(5_000, 20_000),
                loss=0.05 if "loss" in kinds else 0.0,
                duplication=0.05 if "dup" in kinds else 0.0,
            )
        )
    for kind in ("partition", "pause"):
        if kind in kinds:
            out.append(
                Step(
                    at_ms=rng.randint(start, end),
                    op=kind,
                    member=rng.choice(members),
                    duration_ms=rng.randint(2_000, 15_000),
                )
            )
    if "failover" in kinds:
        out.append(Step(at_ms=rng.randint(start, end), op="failover", duration_ms=rng.randint(100, 5_000)))
    return out
