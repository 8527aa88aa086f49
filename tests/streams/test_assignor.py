"""The streams partition assignor through the real leader step, on the wordcount topology."""

from __future__ import annotations

import logging
import struct
from typing import ClassVar

import pytest

from assignors.partition.hooks import MemberAssignment, subscription_user_data
from assignors.partition.types import PartitionAssignor, RebalanceProtocol
from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import (
    RUNNING_LAG,
    ApplicationState,
    AssignmentConfigs,
    ProcessAssignment,
    TaskAssignment,
)
from streamtasks.protocol.userdata import (
    RUNNING_OFFSET_SUM,
    UNKNOWN_OFFSET_SUM,
    AssignmentInfo,
    AssignorErrorCode,
    SubscriptionInfo,
    decode_subscription_info,
    encode_assignment_info,
    encode_subscription_info,
)
from streamtasks.streams import StreamsPartitionAssignor
from tests.streams.helpers import (
    CHANGELOG,
    NOW,
    REPARTITION,
    Answer,
    assignor,
    member,
    pid,
    run,
    source_partitions,
    task,
    wordcount,
)
from topology import TopicPartition

ALL = {f"{s}_{p}" for s in (0, 1) for p in range(4)}
STATEFUL = {f"1_{p}" for p in range(4)}
STATELESS = ALL - STATEFUL


def running(*tasks: str) -> dict[str, int]:
    return dict.fromkeys(tasks, RUNNING_OFFSET_SUM)


def actives(answer: Answer) -> dict[str, set[str]]:
    return {m: answer.active(m) for m in answer.infos}


def assert_consistent(answer: Answer) -> None:
    """Every member's partitions are exactly the source partitions of its active tasks, and no
    partition or active task is given twice."""
    seen: set[TopicPartition] = set()
    for m, parts in answer.partitions.items():
        assert parts == source_partitions(*answer.active(m)) if m in answer.infos else parts == ()
        assert not seen & set(parts)
        seen |= set(parts)
    names = [t for m in answer.infos for t in answer.active(m)]
    assert len(names) == len(set(names))


# -- fresh groups ---------------------------------------------------------------------------------


def test_fresh_group_every_task_runs_once_balanced_without_followup() -> None:
    a = assignor()
    answer = run(
        [member("a", pid(1), of=a, endpoint="h1:80"), member("b", pid(2), of=a, endpoint="h2:80")], a
    )
    assert_consistent(answer)
    got = actives(answer)
    assert got["a"] | got["b"] == ALL
    assert len(got["a"]) == len(got["b"]) == 4
    assert not answer.result.followup_needed
    for m, host in (("a", "h1:80"), ("b", "h2:80")):
        info = answer.infos[m]
        assert (info.version, info.latest_supported_version) == (3, 3)
        assert info.error_code is AssignorErrorCode.NONE
        assert info.acceptable_recovery_lag == 100
        assert info.next_rebalance_ms is None
        assert info.standby_tasks == info.warmup_tasks == frozenset()
        assert {str(t) for t in info.active_tasks_by_host[host]} == got[m]
    assert a.last_problems == ()


def test_a_member_without_endpoint_is_left_out_of_the_host_maps() -> None:
    a = assignor()
    answer = run([member("a", pid(1), of=a, endpoint="h1:80"), member("b", pid(2), of=a)], a)
    assert set(answer.infos["b"].active_tasks_by_host) == {"h1:80"}
    assert {str(t) for t in answer.infos["b"].active_tasks_by_host["h1:80"]} == answer.active("a")


# -- state stays where it is -----------------------------------------------------------------------


def test_process_with_state_keeps_its_tasks() -> None:
    a = assignor()
    # process 1 restarted: it owns nothing but has state 10 behind the end for 1_0 and 1_1
    answer = run([member("a", pid(1), of=a, sums={"1_0": 990, "1_1": 995}), member("b", pid(2), of=a)], a)
    assert_consistent(answer)
    assert {"1_0", "1_1"} <= answer.active("a")
    assert answer.active("a").isdisjoint(answer.active("b"))


def test_new_empty_process_gets_warmups_not_the_stateful_actives() -> None:
    a = assignor()
    everything = source_partitions(*ALL)
    answer = run(
        [
            member("a", pid(1), of=a, sums=running(*ALL), owned=everything, generation=4),
            member("b", pid(2), of=a),
        ],
        a,
    )
    assert_consistent(answer)
    assert answer.active("a") == STATEFUL  # nobody else is caught up: the actives stay
    assert not answer.active("b") & STATEFUL
    assert answer.warmup("b")
    assert answer.warmup("b") <= STATEFUL
    assert len(answer.warmup("b")) <= 2  # max_warmup_replicas
    assert answer.infos["b"].next_rebalance_ms == NOW + 600_000  # the probing rebalance
    assert answer.infos["a"].next_rebalance_ms == NOW + 600_000


def test_a_standby_on_a_movements_destination_is_reported_as_a_warmup() -> None:
    recorder = _Recording()
    a = assignor(task_assignor=recorder, standbys=1)
    answer = run(
        [
            member(
                "a", pid(1), of=a, sums=running(*STATEFUL), owned=source_partitions(*STATEFUL), generation=4
            ),
            member("b", pid(2), of=a),  # new: no state anywhere
        ],
        a,
    )
    assert_consistent(answer)
    planned = recorder.results[-1]
    moving = {str(t) for t, dest in planned.movements.items() if dest == pid(2)}
    assert len(moving) == 2
    assert moving <= STATEFUL
    by_pid = {p.process_id: p for p in planned.processes}
    assert {str(t) for t in by_pid[pid(2)].standby} == STATEFUL  # b holds a standby of each
    assert answer.active("a") == STATEFUL  # nobody else is caught up yet
    assert answer.warmup("b") == moving  # the standbys that warm up a movement
    assert answer.standby("b") == STATEFUL - moving
    assert not answer.infos["b"].standby_tasks & answer.infos["b"].warmup_tasks
    assert answer.infos["b"].next_rebalance_ms == NOW + 600_000  # probing follows
    assert answer.warmup("a") == answer.standby("a") == set()


def test_unknown_offset_sum_means_a_full_restore() -> None:
    recorder = _Recording()
    a = assignor(task_assignor=recorder)
    run([member("a", pid(1), of=a, sums={"1_0": UNKNOWN_OFFSET_SUM})], a)
    assert recorder.states[-1].clients[pid(1)].task_lags == {task("1_0"): 1_000}


# -- cooperative hand-over ------------------------------------------------------------------------


def test_cooperative_move_is_withheld_and_needs_a_followup() -> None:
    a = assignor()
    everything = source_partitions(*ALL)
    first = run(
        [
            member("a", pid(1), of=a, sums=running(*ALL), owned=everything, generation=4),
            member("b", pid(2), of=a),
        ],
        a,
    )
    assert_consistent(first)
    moving = STATELESS  # the balanced destination of the stateless tasks is process 2
    assert first.active("b") == set()  # withheld: still owned by a
    assert first.partitions["b"] == ()
    assert first.active("a") == STATEFUL  # a gives the moving tasks up (revokes them)
    assert not set(first.partitions["a"]) & set(source_partitions(*moving))
    assert first.result.followup_needed
    # follow-up: a owns what it kept, nobody owns the moving partitions any more
    second = run(
        [
            member("a", pid(1), of=a, sums=running(*STATEFUL), owned=first.partitions["a"], generation=5),
            member("b", pid(2), of=a, sums={t: 0 for t in first.warmup("b")}, generation=5),
        ],
        a,
    )
    assert_consistent(second)
    assert second.active("b") == moving
    assert second.active("a") == STATEFUL
    assert not second.result.followup_needed


def test_a_withheld_stateful_task_restores_as_a_standby_meanwhile() -> None:
    a = assignor()
    # a runs every stateful task; b runs the stateless ones and is caught up on 1_2 and 1_3
    members = [
        member("a", pid(1), of=a, sums=running(*STATEFUL), owned=source_partitions(*STATEFUL), generation=7),
        member(
            "b",
            pid(2),
            of=a,
            sums={**running(*STATELESS), "1_2": 990, "1_3": 990},
            owned=source_partitions(*STATELESS),
            generation=7,
        ),
    ]
    answer = run(members, a)
    assert_consistent(answer)
    moved_to_b = (STATEFUL - answer.active("a")) - answer.active("b")
    assert moved_to_b, "a stateful task moves from a to b"
    assert moved_to_b <= answer.standby("b")  # restoring while a revokes it
    assert not set(answer.partitions["a"]) & set(source_partitions(*moved_to_b))
    assert answer.result.followup_needed


def test_eager_members_own_nothing_and_keep_what_they_ran() -> None:
    a = assignor()
    mine = {"1_0", "1_1", "0_0", "0_1"}
    answer = run(
        [
            member("a", pid(1), of=a, sums=running(*mine)),
            member("b", pid(2), of=a, sums=running(*(ALL - mine))),
        ],
        a,
    )
    assert_consistent(answer)
    assert answer.active("a") == mine
    assert answer.active("b") == ALL - mine
    assert not answer.result.followup_needed


# -- several members (threads) per process ---------------------------------------------------------


def test_two_members_of_one_process_share_its_tasks_evenly() -> None:
    a = assignor()
    answer = run([member("a1", pid(1), of=a), member("a2", pid(1), of=a), member("b", pid(2), of=a)], a)
    assert_consistent(answer)
    got = actives(answer)
    assert got["a1"] | got["a2"] | got["b"] == ALL
    assert abs(len(got["a1"]) - len(got["a2"])) <= 1
    assert len(got["a1"] | got["a2"]) > len(got["b"])  # two threads, twice the capacity


def test_a_member_keeps_the_tasks_whose_partitions_it_owns() -> None:
    a = assignor()
    first = run([member("a1", pid(1), of=a), member("a2", pid(1), of=a)], a)
    swapped_ids = run(
        [
            member("a1", pid(1), of=a, owned=first.partitions["a2"], generation=3),
            member("a2", pid(1), of=a, owned=first.partitions["a1"], generation=3),
        ],
        a,
    )
    assert swapped_ids.active("a1") == first.active("a2")
    assert swapped_ids.active("a2") == first.active("a1")
    assert not swapped_ids.result.followup_needed


# -- bad peers ------------------------------------------------------------------------------------


def test_an_undecodable_member_gets_nothing_and_the_others_everything() -> None:
    a = assignor()
    answer = run([member("a", pid(1), of=a), member("z", pid(9), of=a, user_data=b"\x00\x01junk")], a)
    assert answer.partitions["z"] == ()
    assert answer.infos["z"].error_code is AssignorErrorCode.ASSIGNMENT_ERROR
    assert answer.infos["z"].version == 1  # its header did not even read
    assert answer.active("a") == ALL
    assert any("'z'" in p and "undecodable" in p for p in a.last_problems)


def test_offset_sums_of_unknown_tasks_are_dropped_with_a_problem() -> None:
    a = assignor()
    answer = run([member("a", pid(1), of=a, sums={"9_0": 5, "1_0": 990})], a)
    assert answer.active("a") == ALL
    assert any("9_0" in p for p in a.last_problems)


def test_a_newer_member_is_answered_at_our_version_and_probing_follows() -> None:
    a = assignor()
    future = struct.pack(">ii", 4, 4) + pid(7).bytes + b"fields of version 4"
    assert decode_subscription_info(future).version == 4
    answer = run([member("a", pid(1), of=a), member("f", pid(7), of=a, user_data=future)], a)
    assert_consistent(answer)
    assert {answer.infos[m].version for m in ("a", "f")} == {3}
    assert answer.active("a") | answer.active("f") == ALL
    assert answer.active("f")  # it takes part, as a process without previous tasks
    assert answer.result.followup_needed
    assert any("version probing" in p for p in a.last_problems)


def test_an_older_member_moves_the_group_down_and_an_upgrade_follows() -> None:
    a = assignor()
    answer = run([member("a", pid(1), of=a), member("old", pid(2), of=a, version=1)], a)
    assert {(i.version, i.latest_supported_version) for i in answer.infos.values()} == {(1, 3)}
    assert answer.active("a") | answer.active("old") == ALL
    assert answer.result.followup_needed  # every member can speak v3: probing moves them up


def test_missing_source_metadata_gives_everyone_nothing() -> None:
    a = assignor()
    answer = run([member("a", pid(1), of=a)], a, partitions_per_topic={REPARTITION: 4})
    assert answer.partitions["a"] == ()
    assert answer.infos["a"].error_code is AssignorErrorCode.INCOMPLETE_SOURCE_TOPIC_METADATA
    assert any("text" in p for p in a.last_problems)


def test_a_shutdown_request_is_passed_to_every_member() -> None:
    a = assignor()
    info = SubscriptionInfo(process_id=pid(2), error_code=AssignorErrorCode.SHUTDOWN_REQUESTED)
    answer = run(
        [member("a", pid(1), of=a), member("b", pid(2), of=a, user_data=encode_subscription_info(info))], a
    )
    assert {i.error_code for i in answer.infos.values()} == {AssignorErrorCode.SHUTDOWN_REQUESTED}
    assert set(answer.partitions.values()) == {()}


def test_other_topology_fingerprint_is_reported() -> None:
    a = assignor()
    info = SubscriptionInfo(process_id=pid(2), topology_fingerprint=b"\x01" * 16)
    answer = run(
        [member("a", pid(1), of=a), member("b", pid(2), of=a, user_data=encode_subscription_info(info))], a
    )
    assert answer.active("a") | answer.active("b") == ALL
    assert any("fingerprint" in p for p in a.last_problems)


# -- task assignor failures --------------------------------------------------------------------------


class _Recording:
    """The high-availability assignor, remembering what it was given."""

    name: ClassVar[str] = "recording"

    def __init__(self) -> None:
        self.states: list[ApplicationState] = []
        self.results: list[TaskAssignment] = []

    def assign(self, state: ApplicationState) -> TaskAssignment:
        self.states.append(state)
        self.results.append(HighAvailabilityTaskAssignor().assign(state))
        return self.results[-1]


class _Failing:
    name: ClassVar[str] = "failing"

    def assign(self, state: ApplicationState) -> TaskAssignment:
        raise RuntimeError("boom")


class _Duplicating:
    """Gives every task to every process as active: invalid."""

    name: ClassVar[str] = "duplicating"

    def assign(self, state: ApplicationState) -> TaskAssignment:
        return TaskAssignment(
            processes=tuple(
                ProcessAssignment(process_id=p, active=frozenset(state.tasks)) for p in state.clients
            )
        )


def test_a_failing_task_assignor_leaves_every_process_its_previous_actives() -> None:
    for broken in (_Failing(), _Duplicating()):
        a = assignor(task_assignor=broken, standbys=1)
        answer = run(
            [
                member(
                    "a",
                    pid(1),
                    of=a,
                    sums=running("1_0", "0_0"),
                    owned=source_partitions("1_0", "0_0"),
                    generation=2,
                ),
                member("b", pid(2), of=a, sums={"1_0": 5, **running("1_1")}),
            ],
            a,
        )
        assert_consistent(answer)
        assert answer.active("a") == {"1_0", "0_0"}
        assert answer.active("b") == {"1_1"}  # running, owned by nobody (b's protocol is eager)
        assert answer.standby("b") == set()
        assert any(broken.name in p and "previous active" in p for p in a.last_problems)


# -- lags ---------------------------------------------------------------------------------------------


def test_lags_come_from_offset_sums_and_changelog_end_offsets() -> None:
    recorder = _Recording()
    ends = {
        TopicPartition(CHANGELOG, 0): 1_000,
        TopicPartition(CHANGELOG, 1): 1_000,
        TopicPartition(CHANGELOG, 3): 50,
    }
    a = assignor(task_assignor=recorder, ends=ends)
    run(
        [
            member(
                "a",
                pid(1),
                of=a,
                sums={"1_0": RUNNING_OFFSET_SUM, "1_1": 400, "1_2": 400, "1_3": 70},
                owned=source_partitions("0_0"),
                generation=1,
            ),
            member("b", pid(2), of=a, sums={"1_1": UNKNOWN_OFFSET_SUM, "1_2": UNKNOWN_OFFSET_SUM}),
        ],
        a,
    )
    state = recorder.states[-1]
    p1, p2 = state.clients[pid(1)], state.clients[pid(2)]
    assert p1.task_lags == {
        task("0_0"): RUNNING_LAG,  # owns its partition: runs it
        task("1_0"): RUNNING_LAG,
        task("1_1"): 600,  # 1000 - 400
        task("1_2"): 0,  # end offset unknown, real offset sum: taken as caught up
        task("1_3"): 0,  # ahead of a stale end offset
    }
    assert p1.previous_active == {task("0_0"), task("1_0")}
    assert p1.previous_standby == {task("1_1"), task("1_2"), task("1_3")}
    assert p2.task_lags == {task("1_1"): 1_000}  # unknown sum: full restore; 1_2: end unknown, lag unknown
    assert p2.previous_standby == {task("1_1"), task("1_2")}
    assert state.now_ms == NOW


# -- determinism ----------------------------------------------------------------------------------


def test_same_input_same_bytes_whatever_the_member_order() -> None:
    a = assignor(standbys=1)
    members = [
        member(
            "a",
            pid(1),
            of=a,
            sums=running(*STATEFUL),
            owned=source_partitions(*STATEFUL),
            generation=3,
            endpoint="h1:1",
        ),
        member("b1", pid(2), of=a, sums={"1_0": 10}, endpoint="h2:1"),
        member("b2", pid(2), of=a, endpoint="h2:1"),
        member("c", pid(3), of=a, sums={"1_3": UNKNOWN_OFFSET_SUM}),
    ]
    first = run(members, a)
    assert run(members, a).raw == first.raw
    assert run(list(reversed(members)), a).raw == first.raw


def test_a_streams_assignor_is_a_partition_assignor() -> None:
    a = StreamsPartitionAssignor(
        wordcount(),
        task_assignor=HighAvailabilityTaskAssignor(),
        configs=AssignmentConfigs(),
        end_offsets=dict,
        now_ms=lambda: 0,
    )
    assert isinstance(a, PartitionAssignor)
    assert (a.name, a.version) == ("streamtasks", 3)
    assert a.supported_protocols() == (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)


def test_subscription_user_data_carries_the_topology_fingerprint() -> None:
    a = assignor()
    data = a.subscription_user_data(
        process_id=pid(3),
        task_offset_sums={task("1_0"): 5},
        endpoint="h:1",
        rack="r1",
        client_tags={"az": "1"},
    )
    info = decode_subscription_info(data)
    assert info.topology_fingerprint == wordcount().fingerprint()
    assert (info.process_id, info.endpoint, info.rack, dict(info.client_tags)) == (
        pid(3),
        "h:1",
        "r1",
        {"az": "1"},
    )
    assert dict(info.task_offset_sums) == {task("1_0"): 5}
    old = decode_subscription_info(
        a.subscription_user_data(process_id=pid(3), task_offset_sums={}, version=2)
    )
    assert (old.version, old.latest_supported_version) == (2, 3)


# -- the member's side: what its assignment names (on_assignment) --------------------------------


def test_malformed_userdata_decodes_to_an_empty_assignment(caplog: pytest.LogCaptureFixture) -> None:
    a = assignor()
    with caplog.at_level(logging.ERROR, logger="streamtasks.streams.assignor"):
        assert a.on_assignment(MemberAssignment(user_data=b"\x00\x00\x00\x02junk")) == AssignmentInfo()
    assert any("malformed" in r.getMessage() for r in caplog.records)
    assert a.on_assignment(MemberAssignment(user_data=b"")) == AssignmentInfo()
    info = AssignmentInfo(standby_tasks=frozenset({task("1_1")}), warmup_tasks=frozenset({task("1_2")}))
    assert a.on_assignment(MemberAssignment(user_data=encode_assignment_info(info))) == info


def test_the_process_id_and_offset_sums_come_from_what_the_assignor_was_given() -> None:
    sums = {task("1_0"): 5}
    a = StreamsPartitionAssignor(
        wordcount(),
        task_assignor=HighAvailabilityTaskAssignor(),
        configs=AssignmentConfigs(),
        end_offsets=dict,
        now_ms=lambda: NOW,
        process_id=lambda: pid(7),
        task_offset_sums=lambda: sums,
        rack="r2",
    )
    info = decode_subscription_info(subscription_user_data(a, topics=("t",), previous=(), generation=3))
    assert (info.process_id, dict(info.task_offset_sums), info.rack) == (pid(7), sums, "r2")
    sums[task("1_1")] = 9  # read again at the next JoinGroup
    again = decode_subscription_info(subscription_user_data(a, topics=("t",), previous=(), generation=4))
    assert dict(again.task_offset_sums) == sums


def test_the_leader_hands_the_partitions_racks_to_the_task_assignor() -> None:
    """KIP-925: the racks the runtime read from the cluster metadata reach the task assignor."""
    seen: list[ApplicationState] = []

    class Spy:
        name: ClassVar[str] = "spy"

        def assign(self, state: ApplicationState) -> TaskAssignment:
            seen.append(state)
            return HighAvailabilityTaskAssignor().assign(state)

    racks = {TopicPartition("text", 0): frozenset({"eu-1a"})}
    a = StreamsPartitionAssignor(
        wordcount(),
        task_assignor=Spy(),
        configs=AssignmentConfigs(rack_aware_assignment_strategy="min_traffic"),
        end_offsets=dict,
        now_ms=lambda: NOW,
        partition_racks=lambda: racks,
    )
    run([member("a", pid(1), of=a)], a)
    assert [dict(s.partition_racks) for s in seen] == [racks]
