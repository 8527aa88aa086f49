"""Transactional offset commits on the coordinator, pure: Kafka's
``validateTransactionalOffsetCommit`` on consumer groups (KIP-848 and classic members) and streams
groups, the hold (no write and no timer of a group while a forwarded commit of it is in flight;
a waiting write keeps new commits back), and the transactional-group record's bytes."""

from __future__ import annotations

import pytest

from streamtasks.coordinator.txn_commits import (
    TRANSACTIONAL_GROUP_RECORD_TYPE,
    CommitHolds,
    TransactionalGroupRecord,
    TxnCommitter,
    check_streams_txn_commit,
    check_txn_commit,
    decode_transactional_group,
    encode_transactional_group,
)
from streamtasks.errors import DecodeError
from streamtasks.protocol.errors import KafkaErrorCode
from tests.coordinator.classic_support import ClassicHarness
from tests.coordinator.streams.support import Harness as StreamsHarness
from tests.coordinator.support import GROUP, Harness

NONE = KafkaErrorCode.NONE


def who(member_id: str = "", generation_id: int = -1, instance: str | None = None) -> TxnCommitter:
    return TxnCommitter(member_id=member_id, generation_id=generation_id, group_instance_id=instance)


def test_a_member_commits_at_its_current_epoch_and_a_fenced_one_gets_kafkas_codes() -> None:
    h = Harness({"foo": 2})
    epoch = h.join("m1").member_epoch
    assert check_txn_commit(h.group, who("m1", epoch)) is NONE
    # the transactional API has no STALE_MEMBER_EPOCH: Kafka answers ILLEGAL_GENERATION
    assert check_txn_commit(h.group, who("m1", epoch - 1)) is KafkaErrorCode.ILLEGAL_GENERATION
    assert check_txn_commit(h.group, who("m1", epoch + 1)) is KafkaErrorCode.ILLEGAL_GENERATION
    assert check_txn_commit(h.group, who("gone", epoch)) is KafkaErrorCode.UNKNOWN_MEMBER_ID
    h.join("m2")
    h.settle()
    bumped = h.members["m1"].epoch
    assert bumped > epoch
    assert check_txn_commit(h.group, who("m1", epoch)) is KafkaErrorCode.ILLEGAL_GENERATION
    assert check_txn_commit(h.group, who("m1", bumped)) is NONE
    h.heartbeat("m1", member_epoch=-1)  # m1 leaves: its commits are fenced
    assert check_txn_commit(h.group, who("m1", bumped)) is KafkaErrorCode.UNKNOWN_MEMBER_ID


def test_commits_without_a_member_follow_kafkas_simple_group_rules() -> None:
    assert check_txn_commit(None, who()) is NONE  # Kafka creates a simple group
    assert check_txn_commit(None, who("x", 3)) is KafkaErrorCode.ILLEGAL_GENERATION
    h = Harness({"foo": 2})
    h.join("m1")
    # TxnOffsetCommit v0-v2 carry no group metadata: not checked, as in Kafka
    assert check_txn_commit(h.group, who()) is NONE
    assert check_txn_commit(h.group, who(instance="i-1")) is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert check_txn_commit(h.group, who("", 4)) is KafkaErrorCode.UNKNOWN_MEMBER_ID
    h.heartbeat("m1", member_epoch=-1)
    assert h.group is not None
    assert not h.group.members
    assert check_txn_commit(h.group, who("", -1, "i-1")) is NONE  # an empty group: epoch -1 commits


def test_a_classic_member_commits_with_its_generation() -> None:
    h = ClassicHarness()
    a = h.add("a")
    h.cjoin("a")
    h.csync("a")
    assert check_txn_commit(h.group, who(a.member_id, a.generation)) is NONE
    assert check_txn_commit(h.group, who(a.member_id, a.generation - 1)) is KafkaErrorCode.ILLEGAL_GENERATION
    h.cleave("a")
    assert check_txn_commit(h.group, who(a.member_id, a.generation)) is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert check_txn_commit(h.group, who(a.member_id, -1)) is NONE  # the group is empty now


def test_a_streams_member_commits_at_its_epoch() -> None:
    h = StreamsHarness()
    m = h.add("m1")
    h.round(3)
    group = h.coordinator.group("app")
    assert group is not None
    assert check_streams_txn_commit(group, who("m1", m.epoch)) is NONE
    assert check_streams_txn_commit(group, who("m1", m.epoch - 1)) is KafkaErrorCode.ILLEGAL_GENERATION
    assert check_streams_txn_commit(group, who("m2", m.epoch)) is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert check_streams_txn_commit(group, who()) is NONE


def test_holds_keep_writes_back_while_a_commit_is_in_flight_and_commits_behind_a_waiting_write() -> None:
    holds = CommitHolds()
    assert holds.may_write("g")
    assert holds.may_commit("g")
    assert holds.held() == frozenset()
    holds.begin("g")
    holds.begin("g")
    assert not holds.may_write("g")
    assert holds.may_write("other")  # other groups go on
    assert holds.held() == {"g"}
    holds.wait_write("g")  # a heartbeat of g waits ...
    assert not holds.may_commit("g")  # ... and new commits of g wait behind it
    assert holds.may_commit("other")
    holds.end("g")
    assert not holds.may_write("g")  # one still in flight
    holds.end("g")
    assert holds.may_write("g")
    assert holds.held() == frozenset()
    holds.wrote("g")
    assert holds.may_commit("g")
    with pytest.raises(ValueError, match="no commit"):
        holds.end("g")
    with pytest.raises(ValueError, match="no write"):
        holds.wrote("g")


def test_the_timers_of_a_held_group_wait_for_the_answer() -> None:
    h = Harness({"foo": 2})
    h.join("m1")
    h.join("m2")
    h.settle()
    session = h.coordinator.config.session_timeout_ms
    h.now += session + 1  # both sessions have expired
    held = h.coordinator.poll(h.now, frozenset({GROUP}))
    assert held == []
    assert set(h.group.members) == {"m1", "m2"}  # a commit of m1 in flight: nobody is removed
    results = h.coordinator.poll(h.now)  # the answer came: the timers fire
    assert results
    assert h.group is None or not h.group.members


def test_the_timers_of_a_held_streams_group_wait_for_the_answer() -> None:
    h = StreamsHarness()
    h.add("m1")
    h.round(3)
    h.now += 10 * 60_000
    assert h.coordinator.poll(h.now, frozenset({"app"})) == []
    group = h.coordinator.group("app")
    assert group is not None
    assert "m1" in group.members
    assert h.coordinator.poll(h.now)
    group = h.coordinator.group("app")
    assert group is None or "m1" not in group.members


def test_the_transactional_group_record_round_trips_and_refuses_bad_bytes() -> None:
    record = TransactionalGroupRecord(group_id="orders")
    key, value = encode_transactional_group(record)
    assert key == TRANSACTIONAL_GROUP_RECORD_TYPE.to_bytes(2, "big") + b"\x00\x06orders"
    assert value == b"\x00\x00\x00"  # value version 0, no tagged fields
    assert decode_transactional_group(key, value) == record
    with pytest.raises(DecodeError):
        decode_transactional_group(key, None)
    with pytest.raises(DecodeError):
        decode_transactional_group(key, b"\x00\x01\x00")  # version 1
    with pytest.raises(DecodeError):
        decode_transactional_group(key + b"x", value)
    with pytest.raises(DecodeError):
        decode_transactional_group(b"\x00\x03" + key[2:], value)
