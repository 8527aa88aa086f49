"""A drill's script in the simulator (``streamtasks drill run NAME --simulate --members N``).

The simulator (:mod:`streamtasks.sim`) runs the real classic member machines against a model
of Kafka's group coordinator over a simulated network, checking its invariants after every
event (exclusive ownership among live members, no partition handed over without a commit, the
group converging). A drill's script becomes a scenario: ``members`` members start on stage 0,
then each later stage is a rolling bounce: every member leaves cleanly (commit, LeaveGroup) and
restarts ``down_ms`` later on that stage's assignors, the next member leaving ``spacing_ms``
after the previous one restarted (the group need not have settled in between: with many members
rebalances overlap, as in a fast real rollout).

Consumer-group drills restart each member on the stage's assignor list. App drills
(``userdata-upgrade``, ``userdata-probing``, ``faust-to-streamtasks``) restart it on the stage's
application (:mod:`streamtasks.drills.simulated_app`): the real streams partition assignor built
as the App builds it from ``upgrade_from`` / ``emulate_release`` (faust's protocol first with
``upgrade_from="faust"``), and for faust stages a model of a faust worker (the classic member
offering only faust's protocol, led by streamtasks' implementation of faust's assignor). They
are simulated at the assignment and ownership level: tasks, no records, no state. Their verdict
adds the App checks (:func:`~streamtasks.drills.simulated_app.app_problems`).

A drill whose stages move the group between the classic protocol and KIP-848
(``classic-to-consumer``: a stage with ``--group-protocol consumer``) runs in the KIP-848 world
instead (:mod:`streamtasks.sim.kip848`): streamtasks' own coordinator
(:class:`~streamtasks.coordinator.GroupCoordinator`, serving classic members through its
JoinGroup / SyncGroup / Heartbeat / LeaveGroup writes) with the real classic member machines and
the real KIP-848 member machines in one group, each restart on its stage's protocol. What is
simulated is that coordinator's migration, not Apache Kafka's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from assignors.partition.types import RebalanceProtocol
from streamtasks.drills.catalog import DrillSpec
from streamtasks.drills.simulated_app import (
    SOURCE_TOPIC,
    app_problems,
    app_protocol,
    app_topics,
    app_topology,
    generations_by_protocol,
    stage_app,
    userdata_versions,
)
from streamtasks.errors import ConfigError
from streamtasks.sim.classic_side import RunResult, WorldSettings
from streamtasks.sim.kip848 import SERVER, ConsumerRunResult, ConsumerSettings, run_consumer_scenario
from streamtasks.sim.runner import run_scenario
from streamtasks.sim.scenario import Scenario, Step, Timeouts
from topology.model import Topology

__all__ = ["SimulatedDrill", "drill_scenario", "run_drill_scenario", "simulate_drill"]


@dataclass(slots=True, kw_only=True)
class SimulatedDrill:
    drill: str
    members: int
    partitions: int
    seed: int
    violations: list[str] = field(default_factory=list)
    rebalances: int = 0
    revoked: int = 0
    lost: int = 0
    moved: int = 0
    orphan_partition_ms: int = 0
    handover_without_commit: int = 0
    converged_after_ms: int | None = None
    sim_ms: int = 0
    events: int = 0
    #: App drills: what the App checks found (each fails the drill).
    problems: list[str] = field(default_factory=list)
    #: App drills: live members per userdata version they subscribe with at the end.
    userdata_versions: dict[str, int] = field(default_factory=dict)
    #: App drills: generations per assignor protocol they ran.
    generations_by_protocol: dict[str, int] = field(default_factory=dict)
    #: App drills: rebalances members asked for because version probing moved their version.
    version_probing_rejoins: int = 0
    #: The coordinator simulated: a model of Kafka's classic coordinator, or streamtasks' own
    #: (KIP-848) coordinator for a drill that moves the group between protocols.
    coordinator: str = "Kafka classic group coordinator (model)"

    @property
    def ok(self) -> bool:
        return not self.violations and not self.problems and self.converged_after_ms is not None

    def to_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}
        out["ok"] = self.ok
        return out


#: The coordinator a mixed-protocol drill runs on.
STREAMTASKS_COORDINATOR = "streamtasks coordinator (KIP-848, classic members translated)"


def _assignors(spec: DrillSpec, stage: int) -> tuple[str, ...]:
    args = spec.stages[stage].args
    if "--group-protocol" in args:
        # KIP-848: the coordinator's assignor
        return (args[args.index("--remote-assignor") + 1],) if "--remote-assignor" in args else ("uniform",)
    if "--assignor" not in args:
        raise ConfigError(f"drill {spec.name!r} stage {stage} names no assignors")
    return tuple(args[args.index("--assignor") + 1].split(","))


def drill_scenario(
    spec: DrillSpec,
    *,
    members: int,
    partitions: int,
    seed: int = 0,
    spacing_ms: int = 200,
    down_ms: int = 500,
) -> Scenario:
    """The drill's script as a simulator scenario (see the module docstring)."""
    if not spec.available:
        raise ConfigError(f"drill {spec.name!r} is not available: {spec.unavailable}")
    if members < 2 or partitions < 1:
        raise ConfigError("a simulated drill needs --members >= 2 and --partitions >= 1")
    rng = random.Random(seed)
    names = [f"m{i:04d}" for i in range(members)]
    app = spec.worker == "app"
    topology = app_topology(spec) if app else None
    stages = [_stage_step(spec, stage, topology) for stage in range(len(spec.stages))]
    steps: list[Step] = []
    at = 0
    for name in names:
        steps.append(replace(stages[0], at_ms=at, op="start", member=name))
        at += rng.randint(1, 20)
    at += 30_000  # the group settles before the first bounce
    for stage in stages[1:]:
        for name in names:
            steps.append(Step(at_ms=at, op="leave", member=name))
            steps.append(replace(stage, at_ms=at + down_ms, op="restart", member=name))
            at += (
                down_ms + spacing_ms + rng.randint(0, spacing_ms // 4)
            )  # the next leaves once this one is back
        at += 30_000
    return Scenario(
        seed=seed,
        protocol=(
            RebalanceProtocol.COOPERATIVE
            if is_mixed(spec)
            else RebalanceProtocol.EAGER
            if stages[0].app is None
            else app_protocol(stages[0].app)
        ),
        topics=(("drill", partitions),) if topology is None else app_topics(spec, topology, partitions),
        assignors=stages[0].assignors,
        steps=tuple(steps),
        timeouts=Timeouts(),
        task_topics=() if topology is None else (SOURCE_TOPIC,),
    )


def _stage_step(spec: DrillSpec, stage: int, topology: Topology | None) -> Step:
    """What a member (re)started on ``stage`` runs, as a step to be placed."""
    if topology is not None:
        return Step(at_ms=0, op="", app=stage_app(spec, stage, topology))
    return Step(at_ms=0, op="", assignors=_assignors(spec, stage), group_protocol=_protocol(spec, stage))


def simulate_drill(
    spec: DrillSpec, *, members: int, partitions: int, seed: int = 0, max_events: int = 50_000_000
) -> SimulatedDrill:
    """Run the drill's scenario once; the verdict is the simulator's invariants and convergence."""
    scenario = drill_scenario(spec, members=members, partitions=partitions, seed=seed)
    return run_drill_scenario(spec, scenario, members=members, partitions=partitions, max_events=max_events)


def run_drill_scenario(
    spec: DrillSpec, scenario: Scenario, *, members: int, partitions: int, max_events: int = 50_000_000
) -> SimulatedDrill:
    """Run ``scenario`` (the drill's, or a test's variant of it) and judge it as ``spec``."""
    seed = scenario.seed
    verdict = SimulatedDrill(drill=spec.name, members=members, partitions=partitions, seed=seed)
    result: RunResult | ConsumerRunResult
    if is_mixed(spec):
        # the KIP-848 world: streamtasks' coordinator with classic and KIP-848 members
        result = run_consumer_scenario(
            scenario,
            SERVER,
            ConsumerSettings(max_events=max_events, convergence_bound_ms=600_000, stop_on_violation=True),
        )
        verdict.rebalances = result.group_epochs
        verdict.coordinator = STREAMTASKS_COORDINATOR
    else:
        result = run_scenario(
            scenario,
            WorldSettings(max_events=max_events, convergence_bound_ms=600_000, stop_on_violation=True),
        )
        verdict.rebalances = result.rebalances
        if spec.worker == "app":
            verdict.problems = app_problems(spec, result)
            verdict.userdata_versions = userdata_versions(result)
            verdict.generations_by_protocol = generations_by_protocol(result)
            verdict.version_probing_rejoins = result.app_version_rejoins
    verdict.violations = [str(v) for v in result.violations]
    verdict.revoked = result.revoked
    verdict.lost = result.lost
    verdict.moved = result.moved
    verdict.orphan_partition_ms = result.orphan_partition_ms
    verdict.handover_without_commit = result.handover_without_commit
    verdict.converged_after_ms = result.converged_after_ms
    verdict.sim_ms = result.sim_ms
    verdict.events = result.events
    return verdict


def is_mixed(spec: DrillSpec) -> bool:
    """The drill moves the group between the classic protocol and KIP-848."""
    return any("--group-protocol" in stage.args for stage in spec.stages)


def _protocol(spec: DrillSpec, stage: int) -> str:
    """A mixed drill's stage: ``classic`` or ``consumer``; empty for a classic-only drill."""
    if not is_mixed(spec):
        return ""
    args = spec.stages[stage].args
    return args[args.index("--group-protocol") + 1] if "--group-protocol" in args else "classic"
