"""Builders and hypothesis strategies for task assignor tests."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hypothesis import strategies as st

from assignors.types import (
    RUNNING_LAG,
    ApplicationState,
    AssignmentConfigs,
    ClientState,
    TaskAssignment,
    TaskSpec,
)
from topology.ids import TaskId

__all__ = [
    "ClientSpec",
    "Scenario",
    "build_state",
    "next_generation",
    "pid",
    "scenarios",
    "shuffled_state",
    "task_specs",
]


def pid(n: int) -> uuid.UUID:
    """A process id that sorts by ``n``."""
    return uuid.UUID(int=n + 1)


def task_specs(stateful: Mapping[int, int], stateless: Mapping[int, int] | None = None) -> list[TaskSpec]:
    """``{subtopology: partitions}`` of stateful and of stateless subtopologies."""
    specs = [TaskSpec(id=TaskId(s, p), is_stateful=True) for s, n in stateful.items() for p in range(n)]
    for s, n in (stateless or {}).items():
        specs += [TaskSpec(id=TaskId(s, p), is_stateful=False) for p in range(n)]
    return specs


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSpec:
    """A process, in plain data, so that a test can rebuild it in any order."""

    n: int
    capacity: int = 1
    rack: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    lags: Mapping[TaskId, int] = field(default_factory=dict)

    def build(self, rng: random.Random | None = None) -> ClientState:
        def order(items: Iterable[TaskId]) -> list[TaskId]:
            out = list(items)
            if rng is not None:
                rng.shuffle(out)
            return out

        lags = list(self.lags.items())
        tags = list(self.tags.items())
        if rng is not None:
            rng.shuffle(lags)
            rng.shuffle(tags)
        return ClientState(
            process_id=pid(self.n),
            capacity=self.capacity,
            rack=self.rack,
            client_tags=dict(tags),
            previous_active=frozenset(order(self.active)),
            previous_standby=frozenset(order(self.standby)),
            task_lags=dict(lags),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    tasks: tuple[TaskSpec, ...]
    clients: tuple[ClientSpec, ...]
    configs: AssignmentConfigs = field(default_factory=AssignmentConfigs)
    now_ms: int = 0

    def state(self) -> ApplicationState:
        return build_state(self.tasks, [c.build() for c in self.clients], self.configs, self.now_ms)


def build_state(
    tasks: Iterable[TaskSpec],
    clients: Iterable[ClientState],
    configs: AssignmentConfigs | None = None,
    now_ms: int = 0,
) -> ApplicationState:
    return ApplicationState.build(list(tasks), list(clients), configs or AssignmentConfigs(), now_ms)


def shuffled_state(scenario: Scenario, seed: int) -> ApplicationState:
    """The same application state, every input collection built in another order."""
    rng = random.Random(seed)
    tasks = list(scenario.tasks)
    rng.shuffle(tasks)
    clients = [c.build(rng) for c in scenario.clients]
    rng.shuffle(clients)
    return build_state(tasks, clients, scenario.configs, scenario.now_ms)


def next_generation(
    state: ApplicationState,
    assignment: TaskAssignment,
    *,
    with_lags: bool = True,
    standby_lag: int = 0,
    add: Iterable[ClientState] = (),
) -> ApplicationState:
    """The state of the next rebalance once ``assignment`` ran: actives are running, standbys
    (and warm-ups) report ``standby_lag``; ``add`` joins as new processes."""
    clients = []
    for p in assignment.processes:
        old = state.clients[p.process_id]
        lags: dict[TaskId, int] = {}
        if with_lags:
            lags.update({t: standby_lag for t in p.standby | p.warmup})
            lags.update({t: RUNNING_LAG for t in p.active if state.tasks[t].is_stateful})
        clients.append(
            ClientState(
                process_id=p.process_id,
                capacity=old.capacity,
                rack=old.rack,
                client_tags=old.client_tags,
                previous_active=p.active,
                previous_standby=p.standby,
                task_lags=lags,
            )
        )
    return build_state(state.tasks.values(), [*clients, *add], state.configs, state.now_ms + 1)


_LAG_CHOICES = (RUNNING_LAG, 0, 5, 50, 500)


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    lags: bool = True,
    previous: bool = True,
    racks: bool = True,
    only_racks: bool = False,
    uniform_capacity: bool = False,
    max_processes: int = 7,
) -> Scenario:
    """Small applications: 1-3 subtopologies (some stateless), 1-7 processes with 1-3 threads,
    a random previous assignment (zombie double claims included) and random lags; racks or client
    tags (``only_racks``: always racks, never tags) when ``racks``."""
    n_sub = draw(st.integers(1, 3))
    specs: list[TaskSpec] = []
    for s in range(n_sub):
        is_stateful = draw(st.booleans()) if s else True
        parts = draw(st.integers(1, 8))
        specs += [TaskSpec(id=TaskId(s, p), is_stateful=is_stateful) for p in range(parts)]
    stateful_ids = [t.id for t in specs if t.is_stateful]
    all_ids = [t.id for t in specs]
    n_proc = draw(st.integers(1, max_processes))
    tag_keys = ("zone", "cluster")
    use_tags = racks and not only_racks and draw(st.booleans())
    use_racks = only_racks or (racks and not use_tags and draw(st.booleans()))
    clients = []
    for n in range(n_proc):
        capacity = 1 if uniform_capacity else draw(st.integers(1, 3))
        active: set[TaskId] = set()
        standby: set[TaskId] = set()
        if previous:
            active = set(draw(st.lists(st.sampled_from(all_ids), max_size=6)))
            standby = set(draw(st.lists(st.sampled_from(stateful_ids), max_size=4))) - active
        task_lags: dict[TaskId, int] = {}
        if lags:
            for t in sorted(active & set(stateful_ids)):
                task_lags[t] = draw(st.sampled_from(_LAG_CHOICES))
            for t in draw(st.lists(st.sampled_from(stateful_ids), max_size=4)):
                task_lags[t] = draw(st.sampled_from(_LAG_CHOICES[1:]))
        clients.append(
            ClientSpec(
                n=n,
                capacity=capacity,
                rack=draw(st.sampled_from(("r0", "r1", "r2"))) if use_racks else None,
                tags={k: draw(st.sampled_from(("a", "b", "c"))) for k in tag_keys} if use_tags else {},
                active=frozenset(active),
                standby=frozenset(standby),
                lags=task_lags,
            )
        )
    configs = AssignmentConfigs(
        num_standby_replicas=draw(st.integers(0, 2)),
        acceptable_recovery_lag=draw(st.sampled_from((0, 10, 100))),
        max_warmup_replicas=draw(st.integers(1, 3)),
        rack_aware_assignment_tags=tag_keys if use_tags else (),
    )
    return Scenario(
        tasks=tuple(specs), clients=tuple(clients), configs=configs, now_ms=draw(st.integers(0, 10**6))
    )
