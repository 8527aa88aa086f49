"""KIP-441's high-availability assignor on hand-made situations."""

from __future__ import annotations

from fractions import Fraction

import pytest

import assignors
from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.task.quality import active_spread, colocated_standbys, moved_actives
from assignors.types import (
    RUNNING_LAG,
    ApplicationState,
    AssignmentConfigs,
    AssignmentError,
    ClientState,
    TaskAssignment,
)
from assignors.validate import validate_task_assignment
from streamtasks.errors import AssignorInputError
from tests.assignors.task.scenarios import build_state, next_generation, pid, task_specs
from tests.ids import task as t
from topology.ids import TaskId

HA = HighAvailabilityTaskAssignor()
INTERVAL = AssignmentConfigs().probing_rebalance_interval_ms


def running(*tasks: TaskId) -> dict[TaskId, int]:
    return dict.fromkeys(tasks, RUNNING_LAG)


def actives(result: TaskAssignment, n: int) -> set[TaskId]:
    return set(result.for_process(pid(n)).active)


def test_registry_resolves_the_name() -> None:
    assert isinstance(assignors.get("high_availability"), HighAvailabilityTaskAssignor)
    assert HighAvailabilityTaskAssignor.name == "high_availability"


def test_fresh_start_deals_tasks_round_robin_and_needs_no_followup() -> None:
    state = build_state(task_specs({0: 6}), [ClientState(process_id=pid(n)) for n in range(3)])
    result = HA.assign(state)
    assert actives(result, 0) == {t(0, 0), t(0, 3)}
    assert actives(result, 1) == {t(0, 1), t(0, 4)}
    assert actives(result, 2) == {t(0, 2), t(0, 5)}
    assert result.followup_rebalance_ms is None
    assert not any(p.standby or p.warmup for p in result.processes)


def test_without_lags_previous_owners_keep_their_tasks_within_quota() -> None:
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset({t(0, 0), t(0, 1), t(0, 2), t(0, 3)})),
        ClientState(process_id=pid(1), previous_active=frozenset({t(0, 4), t(0, 5)})),
        ClientState(process_id=pid(2)),
    ]
    result = HA.assign(build_state(task_specs({0: 6}), clients))
    assert actives(result, 0) == {t(0, 0), t(0, 1)}
    assert actives(result, 1) == {t(0, 4), t(0, 5)}
    assert actives(result, 2) == {t(0, 2), t(0, 3)}
    assert result.followup_rebalance_ms is None


def test_a_process_that_is_not_caught_up_gets_warmups_not_actives() -> None:
    tasks = [t(0, p) for p in range(6)]
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset(tasks), task_lags=running(*tasks)),
        ClientState(process_id=pid(1)),
    ]
    state = build_state(task_specs({0: 6}), clients, now_ms=1_000)
    result = HA.assign(state)
    assert actives(result, 0) == set(tasks)
    # the balanced destination of the last three tasks is process 1: two warm-ups (the default
    # max_warmup_replicas), the first ones in task order
    assert result.for_process(pid(1)).warmup == {t(0, 3), t(0, 4)}
    assert result.followup_rebalance_ms == 1_000 + INTERVAL
    assert validate_task_assignment(state, result).name == "NONE"


def test_max_warmup_replicas_bounds_the_warmups_of_one_rebalance() -> None:
    tasks = [t(0, p) for p in range(9)]
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset(tasks), task_lags=running(*tasks)),
        ClientState(process_id=pid(1)),
        ClientState(process_id=pid(2)),
    ]
    configs = AssignmentConfigs(max_warmup_replicas=3)
    result = HA.assign(build_state(task_specs({0: 9}), clients, configs))
    warmups = [w for p in result.processes for w in p.warmup]
    assert len(warmups) == 3
    assert actives(result, 0) == set(tasks)


def test_a_caught_up_warmup_takes_over_its_active() -> None:
    tasks = [t(0, p) for p in range(4)]
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset(tasks), task_lags=running(*tasks)),
        ClientState(process_id=pid(1), task_lags={t(0, 2): 10, t(0, 3): 50_000}),
    ]
    result = HA.assign(build_state(task_specs({0: 4}), clients))
    assert actives(result, 1) == {t(0, 2)}
    assert actives(result, 0) == {t(0, 0), t(0, 1), t(0, 3)}
    assert result.for_process(pid(1)).warmup == {t(0, 3)}
    assert result.needs_followup


def test_warmups_under_way_come_before_new_ones() -> None:
    tasks = [t(0, p) for p in range(8)]
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset(tasks), task_lags=running(*tasks)),
        ClientState(process_id=pid(1), task_lags={t(0, 7): 90_000}),
    ]
    configs = AssignmentConfigs(max_warmup_replicas=1)
    result = HA.assign(build_state(task_specs({0: 8}), clients, configs))
    assert result.for_process(pid(1)).warmup == {t(0, 7)}


def test_a_destination_holding_a_standby_needs_no_warmup() -> None:
    tasks = [t(0, p) for p in range(6)]
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset(tasks), task_lags=running(*tasks)),
        ClientState(process_id=pid(1), previous_standby=frozenset({t(0, 2)}), task_lags={t(0, 2): 70_000}),
        ClientState(process_id=pid(2)),
    ]
    configs = AssignmentConfigs(num_standby_replicas=1)
    result = HA.assign(build_state(task_specs({0: 6}), clients, configs))
    p1 = result.for_process(pid(1))
    assert actives(result, 0) == set(tasks)
    assert t(0, 2) in p1.standby
    warmups = [(p.process_id, w) for p in result.processes for w in p.warmup]
    assert all(w != t(0, 2) for _, w in warmups)
    assert all(w not in result.for_process(q).standby for q, w in warmups)
    assert result.needs_followup


def test_without_standbys_the_destination_gets_a_warmup_even_if_it_held_one() -> None:
    tasks = [t(0, p) for p in range(4)]
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset(tasks), task_lags=running(*tasks)),
        ClientState(process_id=pid(1), previous_standby=frozenset({t(0, 2)}), task_lags={t(0, 2): 70_000}),
    ]
    result = HA.assign(build_state(task_specs({0: 4}), clients))
    assert result.for_process(pid(1)).warmup == {t(0, 2), t(0, 3)}
    assert not result.for_process(pid(1)).standby


def test_a_task_no_process_is_caught_up_on_goes_to_its_destination() -> None:
    clients = [
        ClientState(
            process_id=pid(0), previous_active=frozenset({t(0, 0), t(0, 1)}), task_lags={t(0, 0): 99_999}
        ),
        ClientState(process_id=pid(1), task_lags={t(0, 1): 99_999}),
    ]
    result = HA.assign(build_state(task_specs({0: 2}), clients))
    assert actives(result, 0) == {t(0, 0)}
    assert actives(result, 1) == {t(0, 1)}
    assert result.followup_rebalance_ms is None


def test_the_running_claimant_of_a_doubly_claimed_task_keeps_it() -> None:
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset({t(0, 0)}), task_lags={t(0, 0): 5}),
        ClientState(process_id=pid(1), previous_active=frozenset({t(0, 0)}), task_lags=running(t(0, 0))),
    ]
    result = HA.assign(build_state(task_specs({0: 1}), clients))
    assert actives(result, 1) == {t(0, 0)}
    assert result.followup_rebalance_ms is None


def test_stateless_tasks_balance_the_load_left_by_pinned_stateful_ones() -> None:
    stateful = [t(0, p) for p in range(4)]
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset(stateful), task_lags=running(*stateful)),
        ClientState(process_id=pid(1)),
    ]
    state = build_state(task_specs({0: 4}, {1: 4}), clients, AssignmentConfigs(max_warmup_replicas=5))
    result = HA.assign(state)
    assert actives(result, 0) == set(stateful)
    assert actives(result, 1) == {t(1, p) for p in range(4)}
    assert result.for_process(pid(1)).warmup == {t(0, 2), t(0, 3)}


def test_actives_are_balanced_per_thread() -> None:
    clients = [ClientState(process_id=pid(0), capacity=1), ClientState(process_id=pid(1), capacity=3)]
    state = build_state(task_specs({0: 6}, {1: 2}), clients)
    result = HA.assign(state)
    assert len(actives(result, 0)) == 2
    assert len(actives(result, 1)) == 6
    assert active_spread(state, result) == 0


def test_standbys_never_share_a_process_with_their_active() -> None:
    clients = [ClientState(process_id=pid(n)) for n in range(3)]
    state = build_state(task_specs({0: 6}, {1: 3}), clients, AssignmentConfigs(num_standby_replicas=5))
    result = HA.assign(state)
    assert colocated_standbys(result) == 0
    for task in (t(0, p) for p in range(6)):
        assert sum(task in p.standby for p in result.processes) == 2  # capped at processes - 1
    assert not any(t(1, p) in q.standby for q in result.processes for p in range(3))


def test_standbys_go_to_another_rack() -> None:
    racks = ["a", "a", "b", "b", "c", "c"]
    clients = [ClientState(process_id=pid(n), rack=r) for n, r in enumerate(racks)]
    state = build_state(task_specs({0: 12}), clients, AssignmentConfigs(num_standby_replicas=2))
    result = HA.assign(state)
    rack = {pid(n): r for n, r in enumerate(racks)}
    owner = result.active_owner()
    for task in state.tasks:
        replicas = [owner[task], *(p.process_id for p in result.processes if task in p.standby)]
        assert len({rack[p] for p in replicas}) == 3, task


def test_standbys_spread_over_every_client_tag() -> None:
    zones = ["z1", "z1", "z2", "z2"]
    clusters = ["k1", "k2", "k1", "k2"]
    clients = [
        ClientState(process_id=pid(n), client_tags={"zone": zones[n], "cluster": clusters[n]})
        for n in range(4)
    ]
    configs = AssignmentConfigs(num_standby_replicas=1, rack_aware_assignment_tags=("zone", "cluster"))
    state = build_state(task_specs({0: 8}), clients, configs)
    result = HA.assign(state)
    owner = result.active_owner()
    for p in result.processes:
        for task in p.standby:
            active = owner[task].int - 1
            standby = p.process_id.int - 1
            assert zones[active] != zones[standby], task
            assert clusters[active] != clusters[standby], task


def test_standbys_stay_where_their_state_is_and_leave_room_for_warmups() -> None:
    tasks = [t(0, p) for p in range(4)]
    clients = [
        ClientState(
            process_id=pid(0),
            previous_active=frozenset(tasks[:2]),
            previous_standby=frozenset(tasks[2:]),
            task_lags={**running(*tasks[:2]), tasks[2]: 0, tasks[3]: 0},
        ),
        ClientState(
            process_id=pid(1),
            previous_active=frozenset(tasks[2:]),
            previous_standby=frozenset(tasks[:2]),
            task_lags={**running(*tasks[2:]), tasks[0]: 0, tasks[1]: 0},
        ),
        ClientState(process_id=pid(2)),
    ]
    state = build_state(task_specs({0: 4}), clients, AssignmentConfigs(num_standby_replicas=1))
    result = HA.assign(state)
    assert actives(result, 0) == set(tasks[:2])
    assert actives(result, 1) == set(tasks[2:])
    p2 = result.for_process(pid(2))
    assert not p2.active
    # the destination of 0_3 warms it up; the standby of 0_3 stays away from it
    assert p2.warmup == {t(0, 3)}
    assert not p2.standby
    assert result.needs_followup
    assert result.for_process(pid(0)).standby == {t(0, 2), t(0, 3)}
    assert result.for_process(pid(1)).standby == {t(0, 0), t(0, 1)}


def test_no_tasks_gives_every_process_an_empty_assignment() -> None:
    state = build_state([], [ClientState(process_id=pid(n)) for n in range(2)])
    result = HA.assign(state)
    assert [p.process_id for p in result.processes] == [pid(0), pid(1)]
    assert not any(p.all_tasks for p in result.processes)
    assert result.followup_rebalance_ms is None


def test_tasks_without_processes_are_an_input_error() -> None:
    with pytest.raises(AssignorInputError, match="no processes"):
        HA.assign(build_state(task_specs({0: 2}), []))


def test_with_nowhere_else_to_go_a_standby_lands_on_the_destination_and_replaces_the_warmup() -> None:
    tasks = [t(0, p) for p in range(4)]
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset(tasks), task_lags=running(*tasks)),
        ClientState(process_id=pid(1)),
    ]
    result = HA.assign(build_state(task_specs({0: 4}), clients, AssignmentConfigs(num_standby_replicas=1)))
    p1 = result.for_process(pid(1))
    assert p1.standby == set(tasks)
    assert not p1.warmup
    assert result.needs_followup


def test_extras_raise_the_lowest_per_thread_load_first() -> None:
    """Found by the differential test against Kafka's HighAvailabilityTaskAssignor (issue 11,
    item 5): four stateful tasks and one stateless on processes of 2, 2, 1 and 1 threads, no
    lags beyond process 1 running 0_0 (it ran 1_0 too). Kafka: per-thread spread 1/2, nothing
    moved (e.g. 0_0 and 1_0 stay on process 1, one task on each other process). The quotas'
    extra tasks used to go, in process order, to the 2-thread processes, leaving process 4 with
    none (spread 1) and pushing 1_0 off process 1."""
    clients = [
        ClientState(
            process_id=pid(1),
            capacity=2,
            previous_active=frozenset({t(0, 0), t(1, 0)}),
            task_lags=running(t(0, 0)),
        ),
        ClientState(process_id=pid(2), capacity=2),
        ClientState(process_id=pid(3), capacity=1),
        ClientState(process_id=pid(4), capacity=1),
    ]
    state = build_state(
        task_specs({0: 4}, {1: 1}),
        clients,
        AssignmentConfigs(num_standby_replicas=0, acceptable_recovery_lag=0),
    )
    result = HA.assign(state)
    assert active_spread(state, result) == Fraction(1, 2)
    assert moved_actives(state, result) == 0
    assert actives(result, 1) == {t(0, 0), t(1, 0)}
    assert [len(actives(result, n)) for n in (2, 3, 4)] == [1, 1, 1]


def test_a_task_nobody_is_caught_up_on_takes_the_room_of_a_pinned_one() -> None:
    """Was PINNED_ROOM_NOT_REUSED in the differential test against Kafka: the balanced
    destination of 1_0 is process 2, which is not caught up on it, so it stays on process 1
    (caught up); process 2 used to be left with two tasks beside process 1's four. 0_0, which
    nobody is caught up on and which process 2 is closer to (lag 500, process 1 has no lag for
    it), now takes that room: 3/3 with nothing pending."""
    clients = [
        ClientState(
            process_id=pid(1),
            capacity=2,
            previous_standby=frozenset({t(0, 0), t(0, 1), t(0, 2), t(1, 1)}),
            task_lags={t(0, 3): 5, t(1, 0): 5, t(1, 1): 500},
        ),
        ClientState(process_id=pid(2), capacity=2, task_lags={t(0, 0): 500, t(0, 2): 50}),
    ]
    configs = AssignmentConfigs(num_standby_replicas=1, acceptable_recovery_lag=100, max_warmup_replicas=3)
    state = build_state(task_specs({0: 4, 1: 2}), clients, configs)
    result = HA.assign(state)
    assert actives(result, 1) == {t(0, 1), t(0, 3), t(1, 0)}
    assert actives(result, 2) == {t(0, 0), t(0, 2), t(1, 1)}
    assert not result.movements
    assert not result.needs_followup
    assert validate_task_assignment(state, result).name == "NONE"


def test_a_running_task_swaps_only_when_the_pin_exceeds_the_share() -> None:
    """Process 0 runs 0_1, 0_3 and 0_4, process 1 runs 0_0 and 0_2, the new process 2 is caught
    up on 0_1 only. The balanced destination of 0_4 is process 2, where nobody but process 0 is
    caught up on it. Pinning 0_4 on process 0 would put three tasks on it, beyond its share of
    5/3, so 0_1 (caught up on process 2) moves there instead and nothing is pending. With a
    fourth process (share 5/4) the destination sends 0_3 to process 2 and 0_4 to process 4:
    pinning 0_3 takes process 0 to two tasks, within the share, so it keeps 0_1; pinning 0_4
    (not caught up anywhere else) then takes it to three, and 0_3 gets the swap it was refused:
    0_1 moves to process 2, 0_4 alone is pending."""

    def state(fourth: bool) -> ApplicationState:
        clients = [
            ClientState(
                process_id=pid(0),
                previous_active=frozenset({t(0, 1), t(0, 3), t(0, 4)}),
                task_lags=running(t(0, 1), t(0, 3), t(0, 4)),
            ),
            ClientState(
                process_id=pid(1),
                previous_active=frozenset({t(0, 0), t(0, 2)}),
                task_lags=running(t(0, 0), t(0, 2)),
            ),
            ClientState(process_id=pid(2), task_lags={t(0, 1): 0}),
        ]
        if fourth:
            clients.append(ClientState(process_id=pid(3)))
        return build_state(task_specs({0: 5}), clients, AssignmentConfigs(acceptable_recovery_lag=0))

    result = HA.assign(state(False))
    assert [actives(result, n) for n in range(3)] == [{t(0, 3), t(0, 4)}, {t(0, 0), t(0, 2)}, {t(0, 1)}]
    assert not result.movements
    result = HA.assign(state(True))
    assert [actives(result, n) for n in range(4)] == [
        {t(0, 3), t(0, 4)},
        {t(0, 0), t(0, 2)},
        {t(0, 1)},
        set(),
    ]
    assert dict(result.movements) == {t(0, 4): pid(3)}


def test_a_pin_within_the_share_keeps_the_running_task() -> None:
    """Process 1 (two threads) runs 0_0 and is caught up on 0_1; process 2 (one thread) is
    caught up on 0_0 only. The band gives each process one task and sends 0_1 to process 2.
    Pinning 0_1 on process 1 keeps it at one task per thread, within its share (4/3), so 0_0
    is not moved to make room: 0_1 is a pending movement."""
    clients = [
        ClientState(
            process_id=pid(1),
            capacity=2,
            previous_active=frozenset({t(0, 0)}),
            previous_standby=frozenset({t(0, 1)}),
            task_lags=running(t(0, 0)) | {t(0, 1): 0},
        ),
        ClientState(process_id=pid(2), previous_standby=frozenset({t(0, 0)}), task_lags={t(0, 0): 0}),
    ]
    state = build_state(task_specs({0: 2}), clients, AssignmentConfigs(acceptable_recovery_lag=0))
    result = HA.assign(state)
    assert (actives(result, 1), actives(result, 2)) == ({t(0, 0), t(0, 1)}, set())
    assert dict(result.movements) == {t(0, 1): pid(2)}


def test_a_chain_through_a_third_process_takes_the_room_of_a_pinned_task() -> None:
    """Process 2 ran 0_1, 0_2 and 0_3 (one above its share of two), process 1 ran 0_0 and holds
    0_3 and 0_4 caught up, process 3 ran 0_5 and holds 0_1 caught up. The destination sends 0_3
    to process 1 and 0_4 (caught up only on process 1) to process 3. No task destined to
    process 1 is caught up on process 3, so a direct swap finds nothing; the chain does: 0_4
    stays on process 1, 0_3 goes home to process 2, and 0_1 takes the room on process 3. One
    task moves (0_1, to a caught-up process), as pinning would have moved 0_3; nothing is
    pending."""
    g, a, b, c, i, h = (t(0, p) for p in range(6))
    clients = [
        ClientState(
            process_id=pid(1), previous_active=frozenset({g}), previous_standby=frozenset({c, i}),
            task_lags=running(g) | {c: 0, i: 0},
        ),
        ClientState(process_id=pid(2), previous_active=frozenset({a, b, c}), task_lags=running(a, b, c)),
        ClientState(
            process_id=pid(3), previous_active=frozenset({h}), previous_standby=frozenset({a}),
            task_lags=running(h) | {a: 0},
        ),
    ]  # fmt: skip
    state = build_state(task_specs({0: 6}), clients, AssignmentConfigs(acceptable_recovery_lag=0))
    result = HA.assign(state)
    assert [actives(result, n) for n in (1, 2, 3)] == [{g, i}, {b, c}, {a, h}]
    assert not result.movements
    assert moved_actives(state, result) == 1


def test_the_room_of_pinned_tasks_goes_to_a_task_nobody_is_caught_up_on() -> None:
    """Process 1 ran four of six tasks on one thread; processes 2 and 3 are new, nobody is
    caught up on 0_1 and 0_4. The destination sends 0_3 and 0_5 to process 3 and both stay
    pinned on process 1 (caught up only there). Process 2's 0_1 or 0_4, which restore anyway,
    then takes the room on process 3: 4/1/1 instead of 4/2/0."""
    ran = {t(0, p) for p in (0, 2, 3, 5)}
    clients = [
        ClientState(process_id=pid(1), previous_active=frozenset(ran), task_lags=running(*ran)),
        ClientState(process_id=pid(2)),
        ClientState(process_id=pid(3)),
    ]
    state = build_state(task_specs({0: 6}), clients, AssignmentConfigs(acceptable_recovery_lag=0))
    result = HA.assign(state)
    assert actives(result, 1) == ran
    assert [len(actives(result, n)) for n in (2, 3)] == [1, 1]
    assert dict(result.movements) == {t(0, 3): pid(3), t(0, 5): pid(3)}
    assert moved_actives(state, result) == 0


def test_a_joined_process_gets_its_share_of_standbys_once_caught_up() -> None:
    """Seen live (3 Apps, 6 partitions, one standby): after c took over 0_4 and 0_5, a and b
    kept the standbys of each other's tasks (their state), and the standbys of 0_4 and 0_5 had
    nowhere to go but a and b again: 3/3/0. Pass 4 of the standby placement gives c its two."""
    tasks = [t(0, p) for p in range(6)]

    def client(n: int, active: list[TaskId], standby: list[TaskId]) -> ClientState:
        return ClientState(
            process_id=pid(n),
            previous_active=frozenset(active),
            previous_standby=frozenset(standby),
            task_lags={**dict.fromkeys(standby, 0), **running(*active)},
        )

    a = client(0, [tasks[0], tasks[1], tasks[4]], [tasks[2], tasks[3], tasks[5]])
    b = client(1, [tasks[2], tasks[3], tasks[5]], [tasks[0], tasks[1], tasks[4]])
    state = build_state(
        task_specs({0: 6}), [a, b, ClientState(process_id=pid(2))], AssignmentConfigs(num_standby_replicas=1)
    )
    joined = HA.assign(state)
    c = joined.for_process(pid(2))
    # while c warms up, the standbys stay with their state
    assert c.warmup == {t(0, 4), t(0, 5)}
    assert not c.standby
    assert joined.needs_followup
    # the warm-ups caught up (lag 0): c takes over 0_4 and 0_5 and one standby of a and of b
    state = next_generation(state, joined)
    result = HA.assign(state)
    assert validate_task_assignment(state, result) is AssignmentError.NONE
    assert [actives(result, n) for n in range(3)] == [
        {t(0, 0), t(0, 1)},
        {t(0, 2), t(0, 3)},
        {t(0, 4), t(0, 5)},
    ]
    assert [len(result.for_process(pid(n)).standby) for n in range(3)] == [2, 2, 2]
    assert colocated_standbys(result) == 0
    assert not result.needs_followup
    # and it stays so
    state = next_generation(state, result)
    settled = HA.assign(state)
    assert moved_actives(state, settled) == 0
    assert [len(settled.for_process(pid(n)).standby) for n in range(3)] == [2, 2, 2]
