"""Task assignor benchmarks: streamtasks' high_availability and sticky next to faust-streaming's
``CopartitionedAssignor`` (a peer nobody here wrote) on the same shape.

Run it alone with ``python benchmarks/bench_task.py [--quick]``; ``benchmarks/assignors.py``
collects :func:`rows`. ``seconds`` is the best of several runs of ``assign`` alone (building the
input is not timed), with the garbage collector on, as in a real leader, after a
``gc.collect()``. Quality columns: ``max_minus_min`` -- actives per thread, largest minus
smallest (every process has one thread here); ``moved`` -- actives now on a process that did not
run them before (``None`` for a fresh start); ``colocated_standbys`` -- standby (or warm-up)
replicas on the process running the same task as active, which must be 0; ``warmups`` -- warm-up
replicas handed out.

Shapes: ``P`` processes with one thread each, ``T`` stateful tasks ``0_0 .. 0_(T-1)`` (one
subtopology whose source topics have ``T`` partitions), one standby replica per task. "Fresh": no
previous assignment, no lags. "One process added": every old process ran, in the previous
assignment, what streamtasks' high_availability gave it on the fresh start (its actives report
the running sentinel, its standbys a lag between 0 and 999, within the default acceptable
recovery lag of 10,000), and one new process with no state joins. "16 processes added to 5": the
same with 5 old processes and 16 new ones, streamtasks only (the shape of a KIP-848 group's
early targets while it forms, where most stateful actives are caught up only where they ran).

faust-streaming, same shape: faust assigns each group of co-partitioned topics separately; our
one subtopology with ``T`` tasks is one co-partitioned group of ``T`` partitions, task ``0_p`` is
partition ``p``. A process is a faust client (its ``CopartitionedAssignment``), ``replicas=1`` is
``num_standby_replicas=1``, and faust's per-client ``capacity`` defaults to ``ceil(T / P)``
partitions -- what one thread per process means here. "One process added" hands faust the very
same previous actives and standbys as its clients' current assignment (faust has no notion of
lag; its stickiness comes from that previous assignment alone) and one empty client.
"""

from __future__ import annotations

import argparse
import copy
import gc
import random
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from _paths import project_imports  # benchmarks/assignors.py would shadow the package

with project_imports():
    from assignors.task.high_availability import HighAvailabilityTaskAssignor
    from assignors.task.quality import colocated_standbys, moved_actives, warmup_count
    from assignors.task.sticky import StickyTaskAssignor
    from assignors.types import (
        RUNNING_LAG,
        ApplicationState,
        AssignmentConfigs,
        ClientState,
        TaskAssignment,
        TaskAssignor,
        TaskSpec,
    )
    from assignors.validate import validate_task_assignment
    from topology.ids import TaskId
from _table import format_table

__all__ = ["rows"]

T = TypeVar("T")

HA_GOAL = 0.2  # seconds, issue #2: high_availability, 1,000 processes x 10,000 stateful tasks, 1 standby
FULL = (1000, 10_000)
SMALL = (100, 1000)
#: 5 processes ran every task, 16 join: a 2,000 x 20,000 consumer-client sample's second target
#: (docs/spark.md) had 21 members at 20,000 tasks.
GROWN = (5, 21, 20_000)


def _case(processes: int, tasks: int, what: str) -> str:
    return f"{processes} processes × {tasks} stateful tasks, 1 standby, {what}"


def _best(run: Callable[[], T], repeat: int, fresh_input: Callable[[], Any] | None = None) -> tuple[float, T]:
    best, result = float("inf"), None
    for _ in range(repeat):
        if fresh_input is not None:
            fresh_input()
        gc.collect()
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result


# -- streamtasks ----------------------------------------------------------------------------------


def _process_ids(n: int, seed: int) -> list[uuid.UUID]:
    rng = random.Random(seed)
    return [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(n)]


def _fresh_state(processes: int, tasks: int) -> ApplicationState:
    specs = [TaskSpec(id=TaskId(0, p), is_stateful=True) for p in range(tasks)]
    clients = [ClientState(process_id=pid) for pid in _process_ids(processes, seed=1)]
    return ApplicationState.build(specs, clients, AssignmentConfigs(num_standby_replicas=1))


def _added_state(fresh: ApplicationState, previous: TaskAssignment, added: int = 1) -> ApplicationState:
    rng = random.Random(2)
    clients = []
    for p in previous.processes:
        lags = dict.fromkeys(p.active, RUNNING_LAG)
        lags.update({t: rng.randrange(1000) for t in sorted(p.standby)})
        clients.append(
            ClientState(
                process_id=p.process_id, previous_active=p.active, previous_standby=p.standby, task_lags=lags
            )
        )
    clients += [ClientState(process_id=pid) for pid in _process_ids(added, seed=3)]
    return ApplicationState.build(fresh.tasks.values(), clients, fresh.configs, now_ms=1)


def _spread(state: ApplicationState, result: TaskAssignment) -> int:
    """Actives per thread, max - min; every process of these shapes has one thread."""
    assert all(c.capacity == 1 for c in state.clients.values())
    sizes = [len(p.active) for p in result.processes]
    return max(sizes) - min(sizes)


def _our_row(
    case: str,
    assignor: TaskAssignor,
    state: ApplicationState,
    repeat: int,
    goal: float | None,
    *,
    fresh: bool,
) -> dict[str, object]:
    seconds, result = _best(lambda: assignor.assign(state), repeat)
    verdict = validate_task_assignment(state, result)
    assert verdict.name == "NONE", verdict
    return {
        "suite": "task",
        "case": case,
        "implementation": f"streamtasks {assignor.name}",
        "seconds": seconds,
        "goal_seconds": goal,
        "max_minus_min": _spread(state, result),
        "moved": None if fresh else moved_actives(state, result),
        "colocated_standbys": colocated_standbys(result),
        "warmups": warmup_count(result),
    }


# -- faust-streaming ------------------------------------------------------------------------------


def _faust_assign(
    previous: Mapping[str, tuple[set[int], set[int]]], partitions: int, repeat: int
) -> tuple[float, dict[str, Any]]:
    from faust.assignor.client_assignment import CopartitionedAssignment
    from faust.assignor.copartitioned_assignor import CopartitionedAssignor

    topics = {"source"}
    state: dict[str, dict[str, Any]] = {}

    def build() -> None:  # get_assignment mutates its input: a fresh copy for every run
        state["clients"] = {
            client: CopartitionedAssignment(
                actives=copy.copy(actives), standbys=copy.copy(standbys), topics=set(topics)
            )
            for client, (actives, standbys) in previous.items()
        }

    def run() -> dict[str, Any]:
        return dict(CopartitionedAssignor(topics, state["clients"], partitions, replicas=1).get_assignment())

    return _best(run, repeat, fresh_input=build)


def _faust_row(
    case: str,
    previous: Mapping[str, tuple[set[int], set[int]]],
    partitions: int,
    repeat: int,
    *,
    fresh: bool,
) -> dict[str, object]:
    seconds, result = _faust_assign(previous, partitions, repeat)
    sizes = [len(a.actives) for a in result.values()]
    before = {p: client for client, (actives, _) in previous.items() for p in actives}
    return {
        "suite": "task",
        "case": case,
        "implementation": "faust-streaming CopartitionedAssignor",
        "seconds": seconds,
        "goal_seconds": None,
        "max_minus_min": max(sizes) - min(sizes),
        "moved": None
        if fresh
        else sum(1 for c, a in result.items() for p in a.actives if before.get(p, c) != c),
        "colocated_standbys": sum(len(a.actives & a.standbys) for a in result.values()),
        "warmups": 0,
    }


def _as_faust(result: TaskAssignment, extra: uuid.UUID | None = None) -> dict[str, tuple[set[int], set[int]]]:
    """Our assignment as faust clients' current (actives, standbys) partitions."""
    clients = {
        str(p.process_id): ({t.partition for t in p.active}, {t.partition for t in p.standby})
        for p in result.processes
    }
    if extra is not None:
        clients[str(extra)] = (set(), set())
    return clients


# -- the rows -------------------------------------------------------------------------------------


def _shape_rows(
    shape: tuple[int, int], repeat: int, goal: float | None, faust_runs: int
) -> list[dict[str, object]]:
    n, t = shape
    fresh_case, added_case = _case(n, t, "fresh"), _case(n, t, "one process added")
    ha, sticky = HighAvailabilityTaskAssignor(), StickyTaskAssignor()
    fresh = _fresh_state(n, t)
    out = [
        _our_row(fresh_case, ha, fresh, repeat, goal, fresh=True),
        _our_row(fresh_case, sticky, fresh, repeat, None, fresh=True),
    ]
    previous = ha.assign(fresh)
    added = _added_state(fresh, previous)
    out += [
        _our_row(added_case, ha, added, repeat, goal, fresh=False),
        _our_row(added_case, sticky, added, repeat, None, fresh=False),
    ]
    if faust_runs:
        empty = {str(pid): (set[int](), set[int]()) for pid in fresh.clients}
        out.append(_faust_row(fresh_case, empty, t, faust_runs, fresh=True))
        newcomer = next(pid for pid in added.clients if pid not in fresh.clients)
        out.append(_faust_row(added_case, _as_faust(previous, newcomer), t, faust_runs, fresh=False))
    return out


def _grown_rows(shape: tuple[int, int, int], repeat: int) -> list[dict[str, object]]:
    """A group growing as a KIP-848 group forms: ``before`` processes ran every task (as
    high_availability placed them fresh), ``after - before`` new ones with no state join."""
    before, after, t = shape
    case = _case(after, t, f"{after - before} processes added to {before}")
    fresh = _fresh_state(before, t)
    grown = _added_state(fresh, HighAvailabilityTaskAssignor().assign(fresh), added=after - before)
    return [
        _our_row(case, HighAvailabilityTaskAssignor(), grown, repeat, None, fresh=False),
        _our_row(case, StickyTaskAssignor(), grown, repeat, None, fresh=False),
    ]


def rows(quick: bool = False) -> list[dict[str, object]]:
    """Every benchmark row. ``quick``: fewer repeats, and faust (about 4 s a run on the
    1,000 x 10,000 shape) only on the 100 x 1,000 shape."""
    repeat = 3 if quick else 7
    out = _shape_rows(FULL, repeat, HA_GOAL, faust_runs=0 if quick else 2)
    out += _shape_rows(SMALL, repeat, None, faust_runs=1 if quick else 3)
    out += _grown_rows(GROWN, repeat)
    return out


def _print(table: list[dict[str, object]]) -> None:
    keys = (
        "case",
        "implementation",
        "seconds",
        "goal_seconds",
        "max_minus_min",
        "moved",
        "colocated_standbys",
    )
    heads = ("case", "implementation", "seconds", "goal", "max-min", "moved", "co-located", "warm-ups")
    lines = [
        [
            "-" if r[k] is None else (f"{r[k]:.4f}" if isinstance(r[k], float) else str(r[k]))
            for k in (*keys, "warmups")
        ]
        for r in table
    ]
    print(format_table(heads, lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repeats; faust only on the small shape")
    _print(rows(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
