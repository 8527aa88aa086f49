"""Kafka's OffsetCommit / OffsetFetch rules for consumer groups, on the real coordinator: a
member commits and fetches with its current epoch; an admin commit (no member, epoch -1) is
allowed only while the group has no members; the store keeps the last offset per partition."""

from __future__ import annotations

from streamtasks.coordinator.record_codec import OffsetCommitRecord, OffsetCommitTombstone
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.server.offsets import OffsetCommitCheck, OffsetStore, check_commit, check_fetch
from tests.coordinator.support import GROUP, Harness


def commit(h: Harness, member_id: str, epoch: int, version: int = 9) -> KafkaErrorCode:
    return check_commit(
        h.coordinator.group(GROUP),
        OffsetCommitCheck(group_id=GROUP, member_id=member_id, member_epoch=epoch, api_version=version),
    )


def test_member_commits_with_its_current_epoch_only() -> None:
    h = Harness({"foo": 2})
    epoch = h.join("m1").member_epoch
    assert commit(h, "m1", epoch) is KafkaErrorCode.NONE
    assert commit(h, "m1", epoch - 1) is KafkaErrorCode.STALE_MEMBER_EPOCH
    assert commit(h, "m1", epoch + 1) is KafkaErrorCode.STALE_MEMBER_EPOCH
    assert commit(h, "nobody", epoch) is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert commit(h, "m1", epoch, version=8) is KafkaErrorCode.UNSUPPORTED_VERSION


def test_admin_commit_only_to_a_group_without_members() -> None:
    h = Harness({"foo": 2})
    assert commit(h, "", -1) is KafkaErrorCode.NONE  # no group yet
    assert commit(h, "x", 3) is KafkaErrorCode.GROUP_ID_NOT_FOUND
    assert commit(h, "x", 3, version=8) is KafkaErrorCode.ILLEGAL_GENERATION
    h.join("m1")
    assert commit(h, "", -1) is KafkaErrorCode.UNKNOWN_MEMBER_ID
    h.heartbeat("m1", member_epoch=-1)  # leaves: the group is empty again
    assert commit(h, "", -1) is KafkaErrorCode.NONE


def test_fetch_rules() -> None:
    h = Harness({"foo": 2})
    assert check_fetch(None, None, -1) is KafkaErrorCode.NONE
    assert check_fetch(None, "m1", 1) is KafkaErrorCode.GROUP_ID_NOT_FOUND
    epoch = h.join("m1").member_epoch
    group = h.coordinator.group(GROUP)
    assert check_fetch(group, "m1", epoch) is KafkaErrorCode.NONE
    assert check_fetch(group, "m1", epoch + 1) is KafkaErrorCode.STALE_MEMBER_EPOCH
    assert check_fetch(group, "m2", epoch) is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert check_fetch(group, None, -1) is KafkaErrorCode.NONE


def test_store_keeps_the_last_offset_and_forgets_tombstoned_ones() -> None:
    store = OffsetStore()
    for offset in (5, 9, 7):
        store.replay(OffsetCommitRecord(group_id="g", topic="t", partition=0, offset=offset))
    store.replay(OffsetCommitRecord(group_id="g", topic="t", partition=1, offset=1))
    committed = store.committed("g", "t", 0)
    assert committed is not None
    assert committed.offset == 7
    assert list(store.partitions("g")) == [("t", 0), ("t", 1)]
    store.replay(OffsetCommitTombstone(group_id="g", topic="t", partition=0))
    store.replay(OffsetCommitTombstone(group_id="g", topic="t", partition=1))
    assert store.committed("g", "t", 0) is None
    assert store.group_ids() == []
    assert len(store) == 0
