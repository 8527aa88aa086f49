"""The App drills in the simulator: their stages as simulated applications, and the App checks.

``userdata-upgrade``, ``userdata-probing`` and ``faust-to-streamtasks`` run in the classic
simulator with each stage's worker as a :mod:`streamtasks.sim.apps` application: an App stage
(``--upgrade-from R``, ``--emulate-release R``, ``--faust-compatible``) is a
:class:`~streamtasks.sim.apps.StreamsAppSpec` with those settings, on the topology the live
worker runs (:func:`~streamtasks.drills.stateful_app.keyed_topology`, or
:func:`~streamtasks.drills.stateful_app.faust_counts_topology` for the faust drill); a faust
stage is the faust model (:class:`~streamtasks.sim.apps.FaustAppSpec`). The input topic
``drill`` has ``--partitions`` partitions, one task each; the faust drill's group also
subscribes to the table's changelog and faust's leader topic, whose partitions are not tasks
(``Scenario.task_topics``: ownership is judged on ``drill`` only).

Besides the simulator's invariants, the checks the live drill makes where they make sense
without records (:func:`app_problems`):

* every member ends on the userdata version the drill expects (``final_userdata_version``, or
  the newest the last stage speaks), as its next subscription and in the last streamtasks
  assignment it read (the live drill checks the first);
* every member ends in a group on the last stage's protocol (``"streamtasks"`` once faust's
  protocol is dropped);
* every generation a faust member took part in ran faust's protocol (the group keeps faust's
  assignment while faust members remain), and every faust assignment was readable as faust's;
* no application had an assignment it could not read, or one that broke the version rules.
"""

from __future__ import annotations

from collections import Counter

from assignors.partition.types import RebalanceProtocol
from streamtasks.drills.catalog import DrillSpec, Stage
from streamtasks.drills.stateful_app import faust_counts_topology, keyed_topology
from streamtasks.protocol.faust_compat import FAUST_PROTOCOL_NAME
from streamtasks.protocol.upgrade import STREAMTASKS_PROTOCOL_NAME
from streamtasks.sim.apps import FAUST, AppSpec, FaustAppSpec, GenerationApps, StreamsAppSpec
from streamtasks.sim.classic_side import RunResult
from streamtasks.streams.faust_protocol import faust_topics
from streamtasks.streams.wiring import streams_wire
from topology.model import Topology

__all__ = [
    "SOURCE_TOPIC",
    "app_problems",
    "app_protocol",
    "app_topics",
    "app_topology",
    "expected_protocol",
    "expected_userdata_version",
    "faust_kept",
    "generations_by_protocol",
    "stage_app",
    "userdata_versions",
]

#: The drill's input topic and application id in the simulator.
SOURCE_TOPIC = "drill"
#: At most this many members are named in one problem.
_NAMED = 8


def _is_faust_drill(spec: DrillSpec) -> bool:
    return any(stage.worker == "faust" for stage in spec.stages)


def app_topology(spec: DrillSpec) -> Topology:
    """The topology the drill's App workers run."""
    if _is_faust_drill(spec):
        return faust_counts_topology(SOURCE_TOPIC, SOURCE_TOPIC)
    return keyed_topology(SOURCE_TOPIC, SOURCE_TOPIC)


def app_topics(spec: DrillSpec, topology: Topology, partitions: int) -> tuple[tuple[str, int], ...]:
    """The topics the group's members subscribe to, with their partition counts (the faust
    leader topic has one partition; changelogs as many as the source)."""
    if not _is_faust_drill(spec):
        return ((SOURCE_TOPIC, partitions),)
    return tuple((t, 1 if t.endswith("__leader") else partitions) for t in faust_topics(topology))


def _arg(args: tuple[str, ...], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def stage_app(spec: DrillSpec, stage: int, topology: Topology) -> AppSpec:
    """The application a worker of ``stage`` runs (its worker process's arguments)."""
    chosen: Stage = spec.stages[stage]
    if (chosen.worker or spec.worker) == "faust":
        return FaustAppSpec(topology=topology)
    return StreamsAppSpec(
        topology=topology,
        upgrade_from=_arg(chosen.args, "--upgrade-from"),
        emulate_release=_arg(chosen.args, "--emulate-release"),
    )


def app_protocol(app: AppSpec) -> RebalanceProtocol:
    """The rebalance protocol a member running ``app`` follows (faust is eager-only)."""
    if isinstance(app, FaustAppSpec):
        return RebalanceProtocol.EAGER
    return streams_wire(app.upgrade_from, app.emulate_release).protocol


def expected_userdata_version(spec: DrillSpec) -> int:
    """The userdata version every member must end on."""
    if spec.final_userdata_version is not None:
        return spec.final_userdata_version
    last = spec.stages[-1].args
    return streams_wire(_arg(last, "--upgrade-from"), _arg(last, "--emulate-release")).latest_version


def expected_protocol(spec: DrillSpec) -> str:
    """The assignor protocol the group must end on: the last stage's first offer."""
    last = spec.stages[-1]
    if (last.worker or spec.worker) == "faust":
        return FAUST_PROTOCOL_NAME
    wire = streams_wire(_arg(last.args, "--upgrade-from"), _arg(last.args, "--emulate-release"))
    return FAUST_PROTOCOL_NAME if wire.advertise_faust else STREAMTASKS_PROTOCOL_NAME


def faust_kept(generations: tuple[GenerationApps, ...]) -> str | None:
    """The problem when a generation a faust member took part in ran another protocol."""
    off = [g for g in generations if FAUST in g.kinds and g.protocol != FAUST_PROTOCOL_NAME]
    if not off:
        return None
    shown = ", ".join(f"{g.generation} ({g.protocol})" for g in off[:_NAMED])
    return f"{len(off)} generations with faust members ran another protocol than faust's: {shown}"


def _named(members: list[str]) -> str:
    more = f" and {len(members) - _NAMED} more" if len(members) > _NAMED else ""
    return ", ".join(members[:_NAMED]) + more


def app_problems(spec: DrillSpec, result: RunResult) -> list[str]:
    """The App checks (module docstring) on one run's result."""
    problems: list[str] = []
    if result.app_problems:
        problems.append(
            f"{len(result.app_problems)} assignments an application could not use: "
            + "; ".join(result.app_problems[:_NAMED])
        )
    kept = faust_kept(result.app_generations)
    if kept is not None:
        problems.append(kept)
    want = expected_protocol(spec)
    off_protocol = sorted(f"{a.name} ({a.protocol})" for a in result.apps if a.protocol != want)
    if off_protocol:
        problems.append(f"members not in a {want!r} group at the end: {_named(off_protocol)}")
    version = expected_userdata_version(spec)
    streams = [a for a in result.apps if a.kind != FAUST]
    off_version = sorted(
        f"{a.name} (subscribes v{a.userdata_version}, last assignment v{a.assignment_version})"
        for a in streams
        if a.userdata_version != version or a.assignment_version != version
    )
    if off_version:
        problems.append(f"members not on userdata v{version} at the end: {_named(off_version)}")
    return problems


def userdata_versions(result: RunResult) -> dict[str, int]:
    """Live App members per userdata version they subscribe with at the end."""
    counts = Counter(str(a.userdata_version) for a in result.apps if a.kind != FAUST)
    return dict(sorted(counts.items()))


def generations_by_protocol(result: RunResult) -> dict[str, int]:
    """Generations per assignor protocol they ran (as the applications saw them)."""
    return dict(sorted(Counter(g.protocol for g in result.app_generations).items()))
