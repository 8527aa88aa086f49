"""streamtasks' task assignors against the broker's streams-group ``StickyTaskAssignor``.

Apache Kafka 4.4.0's group coordinator places the tasks of a KIP-1071 streams group with its
``sticky`` assignor (``tests/streams_group_oracle.py``, ``java/oracle/src/StreamsGroupOracle.java``).
streamtasks' ``sticky`` and ``high_availability`` are compared with it on what all three promise:
every task active exactly once, no two copies of a task on one process (active + standby or two
standbys), the standbys asked for wherever there are enough processes, actives balanced over
the processes' threads (``high_availability``: once it asks for no follow-up; until then it
keeps stateful actives on caught-up processes and warms the others up, which the broker's
assignor, without warm-ups in 4.4, does not), and a group whose previous assignment is kept
moves nothing. The
scenarios are rebalances of a running group (previous actives and standbys, members joining and
leaving); one JVM answers a batch of them.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.task.sticky import StickyTaskAssignor
from assignors.types import (
    RUNNING_LAG,
    ApplicationState,
    AssignmentConfigs,
    ClientState,
    TaskAssignment,
    TaskSpec,
)
from tests.oracle import OracleUnavailable, describe_assignment, describe_state, task_quality
from tests.streams_group_oracle import StreamsGroupFailure, run_streams_group_oracle, streams_group_program
from topology.ids import TaskId

try:
    streams_group_program()
except OracleUnavailable as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"the broker's streams assignor cannot run here: {exc}", allow_module_level=True)

ASSIGNORS = (StickyTaskAssignor(), HighAvailabilityTaskAssignor())
BATCH = 25
EXAMPLES = max(1, (settings.default.max_examples if settings.default else 100) // 20)
oracle_settings = settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def rebalances(draw: st.DrawFn) -> ApplicationState:
    """1-3 subtopologies (the first stateful) of 1-12 partitions; 1-6 one-thread processes that
    ran a valid previous assignment, 0-2 joining, up to one gone; standbys report lags 0-5,000."""
    specs: list[TaskSpec] = []
    for s in range(draw(st.integers(1, 3))):
        stateful = draw(st.booleans()) if s else True
        specs += [TaskSpec(id=TaskId(s, p), is_stateful=stateful) for p in range(draw(st.integers(1, 12)))]
    stateful_ids = [t.id for t in specs if t.is_stateful]
    n_old = draw(st.integers(1, 6))
    n = n_old + draw(st.integers(0, 2))
    standbys = draw(st.integers(0, 1))
    active = {t.id: draw(st.integers(0, n_old - 1)) for t in specs}
    held: dict[int, set[TaskId]] = {p: set() for p in range(n)}
    for t in stateful_ids:
        others = [p for p in range(n_old) if active[t] != p]
        if standbys and others:
            held[draw(st.sampled_from(others))].add(t)
    gone = {draw(st.integers(0, n_old - 1))} if n > 1 and draw(st.booleans()) else set()
    clients = []
    for p in range(n):
        if p in gone:
            continue
        previous_active = frozenset(t for t, owner in active.items() if owner == p)
        lags = {t: RUNNING_LAG for t in previous_active if t in stateful_ids}
        lags |= {t: draw(st.sampled_from((0, 50, 5000))) for t in sorted(held[p])}
        clients.append(
            ClientState(
                process_id=uuid.UUID(int=p + 1),
                previous_active=previous_active,
                previous_standby=frozenset(held[p]),
                task_lags=lags,
            )
        )
    return ApplicationState(
        tasks={t.id: t for t in specs},
        clients={c.process_id: c for c in clients},
        configs=AssignmentConfigs(num_standby_replicas=standbys),
    )


def _check_valid(state: ApplicationState, assignment: TaskAssignment, who: str) -> None:
    actives = Counter(t for p in assignment.processes for t in p.active)
    assert set(actives) == set(state.tasks), f"{who}: not every task active"
    assert set(actives.values()) == {1}, f"{who}: a task active twice"
    quality = task_quality(state, assignment, warmups=0, followup=False)
    context = f"{who}\n{describe_state(state)}\n{describe_assignment(assignment)}"
    assert quality.colocated == 0, f"two copies of a task on one process: {context}"
    assert quality.missing_standbys == 0, f"standbys missing: {context}"


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@oracle_settings
@given(st.lists(rebalances(), min_size=BATCH, max_size=BATCH))
def test_same_promises_as_the_broker(states: list[ApplicationState]) -> None:
    broker = run_streams_group_oracle(states)
    for state, theirs in zip(states, broker, strict=True):
        assert not isinstance(theirs, StreamsGroupFailure), f"{theirs.error}\n{describe_state(state)}"
        _check_valid(state, theirs, "broker sticky")
        kafka = task_quality(state, theirs, warmups=0, followup=False)
        assert kafka.active_spread <= 1, describe_state(state)
        for assignor in ASSIGNORS:
            ours = assignor.assign(state)
            _check_valid(state, ours, assignor.name)
            quality = task_quality(state, ours)
            if not ours.needs_followup:  # high_availability balances through warm-ups first
                assert quality.active_spread <= 1, f"{assignor.name}\n{describe_state(state)}"


def _kept(n: int, tasks: int, standbys: int) -> ApplicationState:
    """``n`` processes that ran a balanced assignment of ``tasks`` stateful tasks round-robin,
    each task's standby on the next process, all caught up."""
    ids = [TaskId(0, p) for p in range(tasks)]
    clients = []
    for p in range(n):
        mine = frozenset(t for i, t in enumerate(ids) if i % n == p)
        held = frozenset(t for i, t in enumerate(ids) if standbys and n > 1 and (i + 1) % n == p)
        clients.append(
            ClientState(
                process_id=uuid.UUID(int=p + 1),
                previous_active=mine,
                previous_standby=held,
                task_lags={t: RUNNING_LAG for t in mine} | {t: 0 for t in held},
            )
        )
    return ApplicationState(
        tasks={t: TaskSpec(id=t, is_stateful=True) for t in ids},
        clients={c.process_id: c for c in clients},
        configs=AssignmentConfigs(num_standby_replicas=standbys),
    )


@pytest.mark.parametrize(("n", "tasks", "standbys"), [(2, 4, 1), (3, 9, 1), (4, 10, 0), (5, 32, 1)])
def test_a_kept_assignment_moves_nothing(n: int, tasks: int, standbys: int) -> None:
    state = _kept(n, tasks, standbys)
    (broker,) = run_streams_group_oracle([state])
    assert not isinstance(broker, StreamsGroupFailure)
    for who, assignment in (("broker sticky", broker), *((a.name, a.assign(state)) for a in ASSIGNORS)):
        _check_valid(state, assignment, who)
        quality = task_quality(state, assignment, warmups=0, followup=False)
        assert quality.moved == 0, f"{who}: {describe_assignment(assignment)}"
        assert quality.active_spread <= 1


def test_a_joining_process_gets_its_share_from_both() -> None:
    state = _kept(3, 12, 1)
    joined = ClientState(process_id=uuid.UUID(int=99))
    state = ApplicationState(
        tasks=state.tasks, clients={**state.clients, joined.process_id: joined}, configs=state.configs
    )
    (broker,) = run_streams_group_oracle([state])
    assert not isinstance(broker, StreamsGroupFailure)
    kafka = task_quality(state, broker, warmups=0, followup=False)
    assert kafka.active_spread <= 1
    assert kafka.moved == 3  # 12 tasks over 4 processes: the new one takes 3, nothing else moves
    sticky = StickyTaskAssignor().assign(state)
    ours = task_quality(state, sticky)
    assert ours.active_spread <= 1
    assert ours.moved <= kafka.moved
