"""Scenarios: a group's topics and members, and a timed list of steps, generated from a seed.

A scenario is plain data, so a failing one can be shrunk (steps dropped) and replayed. The
generator draws everything from ``random.Random(seed)``: group size, static members, the
assignors, membership changes (joins, leaves, crashes, bounces), metadata changes, enforced
rebalances, and — when enabled — faults (message loss and duplication, a member cut off from
the cluster, a paused member as in KIP-341's debugger scenario, a coordinator fail-over).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import ConfigError
from streamtasks.sim.apps import AppSpec
from streamtasks.sim.network import LinkProfile

__all__ = [
    "FAULT_KINDS",
    "MEMBERSHIP_OPS",
    "MOVE_TRIGGERS",
    "MOVE_WAIT_MS",
    "RECORDED_FAULT_KINDS",
    "Scenario",
    "Step",
    "Timeouts",
    "generate",
    "parse_faults",
]

#: Step operations that change group membership (the denominator of "per membership change").
MEMBERSHIP_OPS = frozenset({"start", "leave", "crash", "bounce", "restart", "replace"})
#: Fault kinds ``--faults`` accepts (``all``: every one).
FAULT_KINDS = ("loss", "dup", "partition", "pause", "failover", "move")
#: The fault kinds before ``move`` (the golden seeds of tests/sim/test_golden_json.py were
#: recorded with these).
RECORDED_FAULT_KINDS = FAULT_KINDS[:5]
#: When a ``move`` step moves the coordinator: at once (``now``), or at the first moment after
#: it is due when the group is rebalancing (``rebalance``: classic PreparingRebalance, KIP-848
#: not Stable), when SyncGroups are due (``sync``: classic CompletingRebalance; KIP-848: the
#: next heartbeat or assignment RPC while the group rebalances) or an OffsetCommit arrives
#: (``commit``) -- at most :data:`MOVE_WAIT_MS` after the step.
MOVE_TRIGGERS = ("now", "rebalance", "sync", "commit")
MOVE_WAIT_MS = 10_000

EAGER_ASSIGNORS: tuple[tuple[str, ...], ...] = (
    ("range",),
    ("round_robin",),
    ("sticky",),
    ("cooperative_sticky", "range"),  # KIP-429's first upgrade bounce: still EAGER
)
COOPERATIVE_ASSIGNORS: tuple[tuple[str, ...], ...] = (("cooperative_sticky",),)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One thing that happens at ``at_ms``. Which fields matter depends on ``op``:

    ``start`` (member, static, assignors), ``leave``, ``crash``, ``bounce`` (member, duration:
    down time, assignors: those of the restarted process — a rolling upgrade), ``restart``
    (member, assignors), ``replace`` (a static member's new process starts while the old one
    lives on as a zombie), ``enforce`` (member), ``pause`` / ``partition`` (member, duration),
    ``metadata`` (topic, partitions: the new count), ``failover`` (duration: unavailable),
    ``degrade`` (duration, loss, duplication), ``move`` (the group's coordinator moves to another
    broker; duration: the new one's load time; trigger). ``assignors`` empty: the scenario's. In the
    KIP-848 world ``group_protocol`` says which member machine a started process runs.
    """

    at_ms: int
    op: str
    member: str = ""
    duration_ms: int = 0
    static: bool = False
    topic: str = ""
    partitions: int = 0
    loss: float = 0.0
    duplication: float = 0.0
    assignors: tuple[str, ...] = ()
    #: The KIP-848 world only: the protocol a ``start`` / ``restart`` / ``bounce`` runs the member
    #: on, ``classic`` or ``consumer`` (empty: the world's).
    group_protocol: str = ""
    #: The classic world only: the application a ``start`` / ``restart`` / ``bounce`` /
    #: ``replace`` runs (:mod:`streamtasks.sim.apps`), whose assignors take configuration; it
    #: replaces ``assignors`` (None: a plain consumer on ``assignors``).
    app: AppSpec | None = None
    #: A ``move`` step only: when it moves the coordinator (:data:`MOVE_TRIGGERS`).
    trigger: str = ""

    def describe(self) -> str:
        parts = [self.op]
        if self.member:
            parts.append(self.member + (" (static)" if self.static else ""))
        if self.group_protocol:
            parts.append(f"on {self.group_protocol}")
        if self.assignors:
            parts.append(f"[{','.join(self.assignors)}]")
        if self.app is not None:
            parts.append(self.app.describe())
        if self.topic:
            parts.append(f"{self.topic}→{self.partitions} partitions")
        if self.duration_ms:
            parts.append(f"for {self.duration_ms} ms")
        if self.loss or self.duplication:
            parts.append(f"loss={self.loss:.2f} dup={self.duplication:.2f}")
        if self.trigger:
            parts.append(f"when {self.trigger}")
        return " ".join(parts)

    @property
    def end_ms(self) -> int:
        """When the step is over (a ``move`` waiting for its trigger: at the latest)."""
        wait = MOVE_WAIT_MS if self.op == "move" and self.trigger not in ("", "now") else 0
        return self.at_ms + wait + self.duration_ms


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeouts:
    """Member timeouts used by every process of a scenario (kept short to simulate quickly)."""

    session_ms: int = 10_000
    #: Static members' session timeout (``None``: ``session_ms``). Kafka advises long ones for
    #: static members; longer than ``rebalance_ms`` lets a paused static member outlive a
    #: whole rebalance without being removed (see docs/simulation.md).
    static_session_ms: int | None = None
    rebalance_ms: int = 15_000
    heartbeat_ms: int = 1_000
    request_ms: int = 10_000
    retry_backoff_ms: int = 100
    #: ``MemberConfig.followup_heartbeat_ms`` (COOPERATIVE classic members; 0: off).
    followup_heartbeat_ms: int = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    seed: int
    protocol: RebalanceProtocol
    topics: tuple[tuple[str, int], ...]
    assignors: tuple[str, ...]
    steps: tuple[Step, ...]
    timeouts: Timeouts = field(default_factory=Timeouts)
    link: LinkProfile = field(default_factory=LinkProfile)
    generation_marker: bool = True
    #: Upper bound of the delay before a member's metadata refresh sees a change.
    metadata_refresh_ms: int = 5_000
    #: The topics whose partitions are owned exclusively, the ones the ledger and the invariants
    #: follow (empty: every topic). An App's tasks are its source partitions; a faust assignment
    #: also hands out changelog partitions to standbys and faust's leader topic, which are not.
    task_topics: tuple[str, ...] = ()

    @property
    def quiet_ms(self) -> int:
        """When the last step (and the last fault) is over."""
        return max((s.end_ms for s in self.steps), default=0)

    def membership_changes(self) -> int:
        return sum(1 for s in self.steps if s.op in MEMBERSHIP_OPS)

    def without(self, index: int) -> Scenario:
        return replace(self, steps=self.steps[:index] + self.steps[index + 1 :])

    def describe(self) -> list[str]:
        head = (
            f"seed={self.seed} protocol={self.protocol.name} assignors={','.join(self.assignors)} "
            f"topics={','.join(f'{t}:{n}' for t, n in self.topics)} marker={self.generation_marker}"
        )
        return [head] + [f"{s.at_ms:>9} ms  {s.describe()}" for s in self.steps]


def parse_faults(text: str) -> frozenset[str]:
    """``"all"``, ``"none"`` or a comma-separated subset of :data:`FAULT_KINDS`."""
    text = text.strip().lower()
    if text in ("", "none"):
        return frozenset()
    if text == "all":
        return frozenset(FAULT_KINDS)
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    unknown = kinds - set(FAULT_KINDS)
    if unknown:
        raise ConfigError(f"unknown fault kinds {sorted(unknown)}; choose from {', '.join(FAULT_KINDS)}")
    return kinds


def generate(
    seed: int,
    protocol: RebalanceProtocol,
    faults: frozenset[str] = frozenset(FAULT_KINDS),
    *,
    assignors: tuple[str, ...] | None = None,
    timeouts: Timeouts | None = None,
    max_members: int = 6,
    max_steps: int = 12,
) -> Scenario:
    """A random but reproducible scenario for ``seed``. The steps depend on the seed and the
    faults only, so EAGER and COOPERATIVE runs of one seed see the same changes; ``assignors``
    overrides the per-protocol pick (they must yield ``protocol``)."""
    rng = random.Random(seed)
    topics = tuple((f"t{i}", rng.randint(1, 8)) for i in range(rng.randint(1, 3)))
    if assignors is None:
        # drawn apart so that both protocols get the same steps for the same seed
        pool = EAGER_ASSIGNORS if protocol is RebalanceProtocol.EAGER else COOPERATIVE_ASSIGNORS
        assignors = pool[random.Random(f"assignors-{seed}").randrange(len(pool))]
    static_share = rng.choice((0.0, 0.0, 0.4, 1.0))
    names = [f"m{i}" for i in range(max_members)]
    draft = _Draft(rng, names, {name: rng.random() < static_share for name in names}, dict(topics), faults)
    for name in names[: rng.randint(1, min(4, max_members))]:
        draft.steps.append(
            Step(at_ms=rng.randint(0, 2_000), op="start", member=name, static=draft.static[name])
        )
        draft.alive.add(name)
        draft.started.add(name)
    now = max(s.at_ms for s in draft.steps)
    for _ in range(rng.randint(2, max_steps)):
        now += rng.randint(200, 25_000)
        draft.add(now)
    steps = draft.steps
    if "move" in faults:
        steps += _moves(seed, steps)
    steps.sort(key=lambda s: s.at_ms)
    return Scenario(
        seed=seed,
        protocol=protocol,
        topics=topics,
        assignors=assignors,
        steps=tuple(steps),
        timeouts=timeouts or Timeouts(),
        link=LinkProfile(min_delay_ms=1, max_delay_ms=rng.choice((2, 5, 20))),
    )


def _moves(seed: int, steps: list[Step]) -> list[Step]:
    """1-3 coordinator moves at random times between the first step and the last, drawn from
    their own random stream (a seed's other steps are the same with or without moves)."""
    rng = random.Random(f"move-{seed}")
    first = min(s.at_ms for s in steps)
    last = max([s.at_ms for s in steps] + [first + 1_000])
    return [
        Step(
            at_ms=rng.randint(first, last),
            op="move",
            duration_ms=rng.choice((0, 0, rng.randint(1, 500), rng.randint(500, 5_000))),
            trigger=rng.choice(MOVE_TRIGGERS),
        )
        for _ in range(rng.randint(1, 3))
    ]


class _Draft:
    """The generator's running picture of the group, so that every step it draws makes sense
    (a crash hits a live member, a restart a dead one)."""

    def __init__(
        self,
        rng: random.Random,
        names: list[str],
        static: dict[str, bool],
        counts: dict[str, int],
        faults: frozenset[str],
    ) -> None:
        self.rng = rng
        self.names = names
        self.static = static
        self.counts = counts
        self.faults = faults
        self.alive: set[str] = set()
        self.started: set[str] = set()
        self.steps: list[Step] = []

    def add(self, now: int) -> None:
        step = self._draw(now)
        if step is not None:
            self.steps.append(step)

    def _ops(self) -> list[str]:
        alive, faults = self.alive, self.faults
        choices: list[tuple[str, int]] = [
            ("start", 3 if len(alive) < len(self.names) else 0),
            ("metadata", 1),
        ]
        if alive:
            choices += [("leave", 2), ("crash", 2), ("bounce", 2), ("enforce", 1)]
            choices += [(kind, 2) for kind in ("partition", "pause") if kind in faults]
        if self.started - alive:
            choices.append(("restart", 2))
        if "failover" in faults:
            choices.append(("failover", 1))
        if "loss" in faults or "dup" in faults:
            choices.append(("degrade", 1))
        return [op for op, weight in choices for _ in range(weight)]

    def _draw(self, now: int) -> Step | None:
        rng = self.rng
        op = rng.choice(self._ops())
        member = rng.choice(sorted(self.alive)) if self.alive else ""
        if op in ("start", "restart"):
            pool = [n for n in self.names if n not in self.alive]
            member = rng.choice(pool if op == "start" else sorted(self.started - self.alive))
            self.alive.add(member)
            self.started.add(member)
            return Step(at_ms=now, op=op, member=member, static=self.static[member])
        if op in ("leave", "crash"):
            self.alive.discard(member)
            return Step(at_ms=now, op=op, member=member)
        if op == "bounce":
            down = rng.randint(100, 20_000)
            return Step(at_ms=now, op=op, member=member, static=self.static[member], duration_ms=down)
        if op == "enforce":
            return Step(at_ms=now, op=op, member=member)
        if op == "metadata":
            topic = rng.choice(sorted(self.counts))
            self.counts[topic] += rng.randint(1, 3)
            return Step(at_ms=now, op=op, topic=topic, partitions=self.counts[topic])
        if op in ("partition", "pause"):
            return Step(at_ms=now, op=op, member=member, duration_ms=rng.randint(500, 30_000))
        if op == "failover":
            return Step(at_ms=now, op=op, duration_ms=rng.randint(100, 5_000))
        loss = rng.choice((0.01, 0.05, 0.2)) if "loss" in self.faults else 0.0
        dup = rng.choice((0.01, 0.05, 0.2)) if "dup" in self.faults else 0.0
        return Step(
            at_ms=now, op="degrade", duration_ms=rng.randint(1_000, 30_000), loss=loss, duplication=dup
        )
