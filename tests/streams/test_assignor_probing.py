"""Version probing through the streams assignor: an emulated older leader meeting a newer
member, and the member side (:meth:`StreamsPartitionAssignor.read_assignment`), transition by
transition, then the whole one-bounce upgrade over the real leader step."""

from __future__ import annotations

import logging
import uuid

import pytest

from assignors.partition.hooks import MemberAssignment
from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import AssignmentConfigs
from streamtasks.errors import ConfigError, DecodeError, RemoteProtocolError
from streamtasks.protocol import MemberVersionUpdate
from streamtasks.protocol.consumer_protocol import decode_assignment
from streamtasks.protocol.userdata import (
    AssignmentInfo,
    decode_subscription_info,
    encode_assignment_info,
    peek_version,
)
from streamtasks.streams import StreamsPartitionAssignor
from tests.streams.helpers import NOW, changelog_ends, member, pid, run, task, wordcount

ALL = {f"{s}_{p}" for s in (0, 1) for p in range(4)}


def streams(
    *, latest: int = 3, pinned: int | None = None, process: uuid.UUID | None = None
) -> StreamsPartitionAssignor:
    """A member's assignor: ``latest`` is what its code speaks (2: an emulated 0.3),
    ``pinned`` an ``upgrade_from`` version."""
    ends = changelog_ends()
    return StreamsPartitionAssignor(
        wordcount(),
        task_assignor=HighAvailabilityTaskAssignor(),
        configs=AssignmentConfigs(acceptable_recovery_lag=100),
        end_offsets=lambda: ends,
        now_ms=lambda: NOW,
        process_id=(lambda: process) if process is not None else None,
        metadata_version=pinned,
        latest_version=latest,
    )


def subscribe(a: StreamsPartitionAssignor) -> tuple[int, int]:
    """The member joins (its hook writes the subscription); the header it sent."""
    return peek_version(a.subscription_user_data(process_id=pid(1)))


def answer(version: int, common: int, **fields: object) -> MemberAssignment:
    info = AssignmentInfo(version=version, latest_supported_version=common, **fields)
    return MemberAssignment(user_data=encode_assignment_info(info))


# -- the construction ------------------------------------------------------------------------------


def test_an_emulated_release_subscribes_at_its_latest_and_advertises_it() -> None:
    assert subscribe(streams(latest=2)) == (2, 2)
    assert subscribe(streams()) == (3, 3)
    assert subscribe(streams(pinned=2)) == (2, 3)  # upgrade_from: pinned, advertising the latest


@pytest.mark.parametrize(("latest", "pinned"), [(0, None), (4, None), (2, 3), (3, 0)])
def test_versions_out_of_range_are_a_config_error(latest: int, pinned: int | None) -> None:
    with pytest.raises(ConfigError):
        streams(latest=latest, pinned=pinned)


# -- the leader: an emulated older release meets a newer member ------------------------------------


def test_an_older_leader_answers_a_newer_member_at_its_own_version() -> None:
    old = streams(latest=2)
    new = streams()
    members = [
        member("old", pid(1), of=old, sums={"1_0": 500}),
        member("new", pid(2), of=new, sums={"1_1": 500}),
    ]
    result = run(members, old)
    assert {(i.version, i.latest_supported_version) for i in result.infos.values()} == {(2, 2)}
    assert result.active("old") | result.active("new") == ALL
    assert result.result.followup_needed
    assert any("above 2: version probing" in p for p in old.last_problems)
    # The newer member is read as far as its header and process id: no state is known for it.
    assert "1_1" not in result.standby("new") | result.warmup("new")


def test_a_newer_leader_answers_an_emulated_older_member_at_its_version_without_a_followup() -> None:
    old = streams(latest=2)
    new = streams()
    result = run([member("old", pid(1), of=old), member("new", pid(2), of=new, version=2)], new)
    assert {(i.version, i.latest_supported_version) for i in result.infos.values()} == {(2, 2)}
    assert not result.result.followup_needed


# -- the member: one transition at a time ----------------------------------------------------------


def test_stable_stays_without_a_rejoin() -> None:
    a = streams()
    subscribe(a)
    read = a.read_assignment(answer(3, 3))
    assert read.version == MemberVersionUpdate(new_used_version=3, enforce_rebalance=False)
    assert not read.rejoin
    assert a.used_version == 3


def test_newer_member_answered_at_an_older_version_downgrades_and_rejoins() -> None:
    a = streams()
    subscribe(a)
    read = a.read_assignment(answer(2, 2, active_tasks=frozenset({task("0_1")})))
    assert read.rejoin
    assert (read.sent_version, a.used_version) == (3, 2)
    assert read.info.active_tasks == {task("0_1")}  # the tasks are run meanwhile
    assert subscribe(a) == (2, 3)  # still advertising v3, so the group can move up later


def test_downgraded_member_moves_up_once_the_group_speaks_the_newer_version() -> None:
    a = streams(pinned=2)
    subscribe(a)
    read = a.read_assignment(answer(2, 3))
    assert read.rejoin
    assert (read.sent_version, a.used_version) == (2, 3)
    assert subscribe(a) == (3, 3)


def test_newest_member_stays_while_older_pinned_members_move_up() -> None:
    a = streams()
    subscribe(a)
    read = a.read_assignment(answer(1, 3))  # a member pinned to v1 by upgrade_from
    assert not read.rejoin
    assert a.used_version == 3


def test_a_rejoin_that_still_carried_the_old_version_asks_again() -> None:
    """The JoinGroup of a rebalance already under way was written before the member moved
    down; its answer shows the group still got the old version, so the member rejoins again."""
    a = streams()
    subscribe(a)
    subscribe(a)  # a rejoin (revocation) written before the assignment below was read
    assert a.read_assignment(answer(2, 2)).rejoin
    stale = a.read_assignment(answer(2, 2))
    assert stale.rejoin
    assert stale.sent_version == 3
    subscribe(a)
    assert not a.read_assignment(answer(2, 2)).rejoin


def test_an_emulated_older_member_never_moves_above_its_latest() -> None:
    a = streams(latest=2)
    subscribe(a)
    assert not a.read_assignment(answer(2, 2)).rejoin
    read = a.read_assignment(answer(2, 3))
    assert isinstance(read.error, RemoteProtocolError)
    assert "supports up to 2" in str(read.error)
    assert (read.version, a.used_version) == (None, 2)


def test_versions_are_not_followed_when_asked_not_to() -> None:
    a = streams()
    subscribe(a)
    read = a.read_assignment(answer(2, 2), follow_version=False)
    assert (read.version, read.rejoin, a.used_version) == (None, False, 3)
    assert a.on_assignment(answer(2, 2)) == AssignmentInfo(version=2, latest_supported_version=2)
    assert a.used_version == 3  # the hook reads, it does not follow


def test_no_user_data_changes_nothing() -> None:
    a = streams()
    subscribe(a)
    read = a.read_assignment(MemberAssignment(user_data=b""))
    assert (read.info, read.version, read.error) == (AssignmentInfo(), None, None)


# -- the member: what a leader must never send -----------------------------------------------------


def test_an_assignment_at_an_unknown_newer_version_is_a_decode_error_not_a_crash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    a = streams()
    subscribe(a)
    future = answer(3, 3)
    future = MemberAssignment(user_data=b"\x00\x00\x00\x04\x00\x00\x00\x04" + future.user_data[8:])
    with caplog.at_level(logging.ERROR, logger="streamtasks.streams.assignor"):
        read = a.read_assignment(future)
    assert isinstance(read.error, DecodeError)
    assert "version 4 is newer than the latest this member reads (3)" in str(read.error)
    assert (read.info, read.version, a.used_version) == (AssignmentInfo(), None, 3)
    assert any("malformed" in r.getMessage() for r in caplog.records)


def test_an_emulated_older_member_cannot_read_a_newer_assignment() -> None:
    a = streams(latest=2)
    subscribe(a)
    read = a.read_assignment(answer(3, 3))
    assert isinstance(read.error, DecodeError)
    assert (read.info, a.used_version) == (AssignmentInfo(), 2)


def test_an_assignment_newer_than_the_subscription_is_a_remote_protocol_error() -> None:
    a = streams(pinned=2)
    subscribe(a)
    read = a.read_assignment(answer(3, 3, active_tasks=frozenset({task("0_2")})))
    assert isinstance(read.error, RemoteProtocolError)
    assert "sent a version 2 subscription but got a version 3 assignment" in str(read.error)
    assert read.info.active_tasks == {task("0_2")}  # readable: the partitions' tasks still run
    assert (read.rejoin, a.used_version) == (False, 2)


# -- the whole one-bounce upgrade over the real leader step ----------------------------------------


class Group:
    """Members (name -> its assignor), a leader, and rebalances until no member asks for one."""

    def __init__(self, names: list[str]) -> None:
        self.members = {n: streams(latest=2, process=pid(i + 1)) for i, n in enumerate(names)}
        self.process = {n: pid(i + 1) for i, n in enumerate(names)}
        self.leader = names[0]
        self.answers: list[set[tuple[int, int]]] = []

    def rebalance(self) -> bool:
        """One round; whether anything asks for another one."""
        joins = [member(n, self.process[n], of=a) for n, a in self.members.items()]
        result = run(joins, self.members[self.leader])
        self.answers.append({(i.version, i.latest_supported_version) for i in result.infos.values()})
        rejoin = False
        for name, a in self.members.items():
            user_data = decode_assignment(result.raw[name]).user_data or b""
            read = a.read_assignment(MemberAssignment(user_data=user_data))
            assert read.error is None
            rejoin |= read.rejoin
        return rejoin or result.result.followup_needed

    def settle(self) -> int:
        for rounds in range(1, 5):
            if not self.rebalance():
                return rounds
        pytest.fail(f"no convergence: {self.answers}")

    def bounce(self, name: str, new_leader: str | None = None) -> int:
        """``name`` leaves and comes back on the new code; the coordinator keeps the leader
        unless it was the one bouncing."""
        del self.members[name]
        if name == self.leader:
            assert new_leader is not None
            self.leader = new_leader
        self.settle()
        self.members[name] = streams(process=self.process[name])
        return self.settle()

    def versions(self) -> dict[str, int]:
        return {n: a.used_version for n, a in self.members.items()}


@pytest.mark.parametrize("leader_after_old", ["w1", "w2"])
def test_one_bounce_from_an_older_release_ends_on_the_latest_version(leader_after_old: str) -> None:
    g = Group(["w3", "w1", "w2"])  # w3 is the old leader and is bounced last
    assert g.settle() == 1
    assert g.answers[-1] == {(2, 2)}
    # Each new member joins at v3, is answered at v2 by the old leader, moves down, rejoins.
    assert g.bounce("w1") == 2
    assert g.versions() == {"w3": 2, "w1": 2, "w2": 2}
    assert g.bounce("w2") == 2
    assert g.answers[-1] == {(2, 2)}
    # The last old member (the leader) goes: the new leader finds everyone able to speak v3,
    # answers at v2 saying so, the members move up and rejoin; w3 comes back on v3.
    assert g.bounce("w3", new_leader=leader_after_old) == 1
    assert g.answers[-3:] == [{(2, 3)}, {(3, 3)}, {(3, 3)}]
    assert g.versions() == {"w1": 3, "w2": 3, "w3": 3}
    assert decode_subscription_info(g.members["w1"].subscription_user_data()).version == 3
