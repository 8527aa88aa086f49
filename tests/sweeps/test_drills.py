"""Drill scenarios: their steps, determinism, and the formation-only prefix."""

from __future__ import annotations

import pytest

from streamtasks.sweeps.drills import (
    BOUNCE_INTERVAL_MS,
    bounce_sample,
    drill_changes,
    drill_scenario,
    drill_start_ms,
    formation,
    sim_assignors,
)
from streamtasks.sweeps.grid import Point


def _point(**kw: object) -> Point:
    base: dict[str, object] = {
        "protocol": "eager",
        "assignor": "range",
        "members": 5,
        "partitions": 10,
        "standbys": 0,
        "faults": "none",
        "drill": "rolling_bounce",
    }
    return Point(**{**base, **kw})  # type: ignore[arg-type]


def test_rolling_bounce_leaves_and_restarts_every_member_once_after_formation() -> None:
    point = _point()
    scenario = drill_scenario(point, 3)
    t0 = drill_start_ms(5)
    drill = [s for s in scenario.steps if s.at_ms >= t0]
    assert sorted(s.member for s in drill if s.op == "leave") == [f"m{i}" for i in range(5)]
    assert sorted(s.member for s in drill if s.op == "restart") == [f"m{i}" for i in range(5)]
    assert all(s.op == "start" for s in scenario.steps if s.at_ms < t0)
    assert scenario.topics == (("t0", 10),)
    assert drill_changes(point) == 5


def test_same_point_and_seed_same_scenario_other_seed_other_timings() -> None:
    point = _point(faults="failover+loss+partition+pause+dup")
    assert drill_scenario(point, 7) == drill_scenario(point, 7)
    assert drill_scenario(point, 7).steps != drill_scenario(point, 8).steps
    ops = {s.op for s in drill_scenario(point, 7).steps}
    assert {"degrade", "partition", "pause", "failover"} <= ops


@pytest.mark.parametrize(("drill", "ops", "count"), [("scale_out", "start", 5), ("crash", "crash", 1)])
def test_scale_out_and_crash(drill: str, ops: str, count: int) -> None:
    point = _point(drill=drill, members=10)
    scenario = drill_scenario(point, 1)
    later = [s for s in scenario.steps if s.at_ms >= drill_start_ms(10)]
    assert [s.op for s in later] == [ops] * count
    assert drill_changes(point) == count


def test_upgrade_bounces_twice_with_kip429_assignor_lists() -> None:
    scenario = drill_scenario(_point(drill="upgrade", members=3), 0)
    restarts = [s.assignors for s in scenario.steps if s.op == "restart"]
    assert restarts == [("cooperative_sticky", "range")] * 3 + [("cooperative_sticky",)] * 3


def test_formation_keeps_the_starts_before_the_drill_only() -> None:
    point = _point(drill="scale_out", members=4)
    scenario = drill_scenario(point, 2)
    base = formation(scenario, point)
    assert base.steps == tuple(s for s in scenario.steps if s.at_ms < drill_start_ms(4))
    assert sorted(s.member for s in base.steps) == ["m0", "m1", "m2", "m3"]
    assert {s.op for s in base.steps} == {"start"}
    assert base.seed == scenario.seed
    assert base.topics == scenario.topics


def test_assignor_lists_per_protocol() -> None:
    assert sim_assignors(_point(assignor="cooperative_sticky")) == ("cooperative_sticky", "range")
    assert sim_assignors(_point(protocol="consumer-client", assignor="streams")) == ("consumer-client",)
    assert sim_assignors(_point(protocol="cooperative", assignor="cooperative_sticky")) == (
        "cooperative_sticky",
    )


def test_bounce_sample_bounces_the_drawn_members_one_per_interval() -> None:
    point = _point(members=40)
    scenario = bounce_sample(point, 3, 4)
    t0 = drill_start_ms(40)
    assert sorted(s.member for s in scenario.steps if s.op == "start") == sorted(f"m{i}" for i in range(40))
    assert all(s.at_ms < t0 for s in scenario.steps if s.op == "start")
    leaves = [s for s in scenario.steps if s.op == "leave"]
    assert [s.at_ms for s in leaves] == [t0 + i * BOUNCE_INTERVAL_MS for i in range(4)]
    bounced = [s.member for s in leaves]
    assert len(set(bounced)) == 4
    restarts = {s.member: s.at_ms for s in scenario.steps if s.op == "restart"}
    assert set(restarts) == set(bounced)
    assert all(1_000 <= restarts[s.member] - s.at_ms <= 5_000 for s in leaves)
    assert bounce_sample(point, 3, 4) == scenario
    assert {s.member for s in bounce_sample(point, 4, 4).steps if s.op == "leave"} != set(bounced)


@pytest.mark.parametrize(
    ("kw", "sample"), [({"drill": "crash"}, 1), ({"faults": "loss"}, 1), ({}, 0), ({}, 6)]
)
def test_bounce_sample_refuses_other_drills_faults_and_sizes(kw: dict[str, object], sample: int) -> None:
    with pytest.raises(ValueError, match="bounce sample"):
        bounce_sample(_point(**kw), 0, sample)
