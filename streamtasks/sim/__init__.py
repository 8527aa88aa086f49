"""Discrete-event simulation of classic group membership (KIP-429, KIP-341, KIP-568, KIP-814).

The real :class:`~streamtasks.membership.classic.ClassicMember` machines and partition
assignors, unchanged, against a model of Kafka's classic group coordinator over a simulated
network, with invariants checked after every event; the KIP-848 coordinator is the other side
of the same :class:`World` (``streamtasks.sim.kip848``). ``python -m streamtasks.sim`` runs seeded
batches; see docs/simulation.md.
"""

from __future__ import annotations

from streamtasks.sim.batch import Failure
from streamtasks.sim.classic_side import ClassicSide, RunResult, WorldSettings, classic_world
from streamtasks.sim.coordinator import AcceptedCommit, ClassicGroupCoordinator, CoordinatorConfig, Reply
from streamtasks.sim.group_model import GroupModel, GroupState
from streamtasks.sim.host import MemberHost
from streamtasks.sim.invariants import Invariants, convergence_gaps, is_current
from streamtasks.sim.ledger import Holding, OwnershipLedger, Release, ReleaseKind
from streamtasks.sim.network import LinkProfile, Network
from streamtasks.sim.process import SimProcess
from streamtasks.sim.runner import BatchSummary, run_batch, run_scenario, shrink
from streamtasks.sim.scenario import FAULT_KINDS, Scenario, Step, Timeouts, generate, parse_faults
from streamtasks.sim.scheduler import Scheduler, SimClock
from streamtasks.sim.trace import Trace, Violation
from streamtasks.sim.world import Side, World

__all__ = [
    "FAULT_KINDS",
    "AcceptedCommit",
    "BatchSummary",
    "ClassicGroupCoordinator",
    "ClassicSide",
    "CoordinatorConfig",
    "Failure",
    "GroupModel",
    "GroupState",
    "Holding",
    "Invariants",
    "LinkProfile",
    "MemberHost",
    "Network",
    "OwnershipLedger",
    "Release",
    "ReleaseKind",
    "Reply",
    "RunResult",
    "Scenario",
    "Scheduler",
    "Side",
    "SimClock",
    "SimProcess",
    "Step",
    "Timeouts",
    "Trace",
    "Violation",
    "World",
    "WorldSettings",
    "classic_world",
    "convergence_gaps",
    "generate",
    "is_current",
    "parse_faults",
    "run_batch",
    "run_scenario",
    "shrink",
]
