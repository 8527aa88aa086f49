"""The App drills in the simulator: their scripts, small seeded runs, and mutations that the App
checks catch (a member left on the old release, faust's protocol never dropped, ownership
judged on every topic)."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest

from streamtasks.cli import build_parser
from streamtasks.drills.catalog import get_drill
from streamtasks.drills.command import run_drill_command
from streamtasks.drills.simulated import drill_scenario, run_drill_scenario, simulate_drill
from streamtasks.drills.simulated_app import app_topology, faust_kept
from streamtasks.sim.apps import FaustAppSpec, GenerationApps, StreamsAppSpec
from streamtasks.sim.scenario import Scenario

UPGRADE = get_drill("userdata-upgrade")
PROBING = get_drill("userdata-probing")
FAUST = get_drill("faust-to-streamtasks")


def _apps(scenario: Scenario, op: str) -> list[tuple[str, str | None, str | None]]:
    out = []
    for step in scenario.steps:
        if step.op != op:
            continue
        app = step.app
        if isinstance(app, FaustAppSpec):
            out.append(("faust", None, None))
        else:
            assert isinstance(app, StreamsAppSpec)
            out.append(("app", app.upgrade_from, app.emulate_release))
    return out


def test_the_stages_become_the_workers_applications() -> None:
    upgrade = drill_scenario(UPGRADE, members=3, partitions=6, seed=1)
    assert _apps(upgrade, "start") == [("app", "0.2", None)] * 3
    assert _apps(upgrade, "restart") == [("app", "0.2", None)] * 3 + [("app", None, None)] * 3
    probing = drill_scenario(PROBING, members=3, partitions=6, seed=1)
    assert _apps(probing, "start") == [("app", None, "0.3")] * 3
    assert _apps(probing, "restart") == [("app", None, None)] * 3
    faust = drill_scenario(FAUST, members=3, partitions=6, seed=1)
    assert _apps(faust, "start") == [("faust", None, None)] * 3
    assert _apps(faust, "restart") == [("app", "faust", None)] * 3 + [("app", None, None)] * 3


def test_ownership_is_judged_on_the_input_topic_only() -> None:
    probing = drill_scenario(PROBING, members=3, partitions=6)
    assert probing.topics == (("drill", 6),)
    faust = drill_scenario(FAUST, members=3, partitions=6)
    assert faust.task_topics == ("drill",)
    assert dict(faust.topics) == {"drill": 6, "drill-counts-changelog": 6, "drill-__assignor-__leader": 1}


@pytest.mark.parametrize(
    ("name", "members", "seed"),
    [
        ("userdata-upgrade", 6, 1),
        ("userdata-upgrade", 12, 2),
        ("userdata-probing", 6, 1),
        ("userdata-probing", 20, 2),
        ("faust-to-streamtasks", 6, 1),
        ("faust-to-streamtasks", 12, 2),
    ],
)
def test_an_app_drill_passes_in_simulation(name: str, members: int, seed: int) -> None:
    spec = get_drill(name)
    result = simulate_drill(spec, members=members, partitions=12, seed=seed)
    replay = f"seed {seed}: streamtasks drill run {name} --simulate --members {members} --partitions 12"
    assert result.ok, (replay, result.violations, result.problems)
    assert result.userdata_versions == {"3": members}, replay
    assert result.handover_without_commit == 0, replay
    assert result.moved > 0, replay
    protocols = result.generations_by_protocol
    if spec is FAUST:
        assert protocols["faust"] > 0, (replay, protocols)
        assert protocols["streamtasks"] > 0, (replay, protocols)
    else:
        assert set(protocols) == {"streamtasks"}, (replay, protocols)
    if spec is PROBING:
        # the new members moved down to the old leader's v2 and back up once it was gone
        assert result.version_probing_rejoins >= members, replay


def test_a_seed_replays() -> None:
    first = simulate_drill(FAUST, members=6, partitions=12, seed=4)
    assert simulate_drill(FAUST, members=6, partitions=12, seed=4).to_json() == first.to_json()


def _never_bounced(scenario: Scenario, member: str) -> Scenario:
    """``member`` keeps running the release it started on: its leave and restart are dropped."""
    steps = tuple(s for s in scenario.steps if not (s.member == member and s.op in ("leave", "restart")))
    return replace(scenario, steps=steps)


def test_a_leader_that_never_upgrades_fails_the_final_version_check() -> None:
    """m0000 starts first, leads, and is never bounced: an emulated 0.3 leader answers at v2,
    so the new members stay on v2 and the drill fails on its final userdata version."""
    scenario = _never_bounced(drill_scenario(PROBING, members=6, partitions=12, seed=1), "m0000")
    result = run_drill_scenario(PROBING, scenario, members=6, partitions=12)
    assert not result.violations
    assert not result.ok
    assert any("not on userdata v3" in p for p in result.problems), result.problems
    assert result.userdata_versions == {"2": 6}


def test_a_group_that_never_drops_fausts_protocol_fails() -> None:
    scenario = drill_scenario(FAUST, members=6, partitions=12, seed=1)
    faust_again = StreamsAppSpec(topology=app_topology(FAUST), upgrade_from="faust")
    last_stage = [i for i, s in enumerate(scenario.steps) if s.op == "restart"][6:]
    steps = list(scenario.steps)
    for i in last_stage:
        steps[i] = replace(steps[i], app=faust_again)
    result = run_drill_scenario(FAUST, replace(scenario, steps=tuple(steps)), members=6, partitions=12)
    assert not result.ok
    assert any("not in a 'streamtasks' group" in p for p in result.problems), result.problems


def test_faust_standbys_own_changelog_partitions_beside_the_active() -> None:
    """Judged on every topic, faust's assignment gives a changelog partition to an active and a
    standby: ownership must be judged on the tasks' topic."""
    scenario = replace(drill_scenario(FAUST, members=4, partitions=6, seed=1), task_topics=())
    result = run_drill_scenario(FAUST, scenario, members=4, partitions=6)
    assert any("exclusive-ownership" in v and "changelog" in v for v in result.violations), result.violations


def test_faust_kept_names_generations_with_faust_members_on_another_protocol() -> None:
    rows = (
        GenerationApps(generation=1, protocol="faust", kinds=frozenset({"faust"})),
        GenerationApps(generation=2, protocol="faust", kinds=frozenset({"faust", "streams"})),
        GenerationApps(generation=3, protocol="streamtasks", kinds=frozenset({"streams"})),
    )
    assert faust_kept(rows) is None
    off = (*rows, GenerationApps(generation=4, protocol="streamtasks", kinds=frozenset({"faust", "streams"})))
    problem = faust_kept(off)
    assert problem is not None
    assert "4 (streamtasks)" in problem


def test_the_command_prints_the_app_checks() -> None:
    out = io.StringIO()
    args = build_parser().parse_args(["drill", "run", "userdata-probing", "--simulate", "--members", "4"])
    assert run_drill_command(args, out) == 0
    text = out.getvalue()
    assert "PASS" in text
    assert "App checks" in text
    assert "v3: 4" in text
