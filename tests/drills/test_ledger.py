from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamtasks.drills import OwnershipAudit, RecordAudit
from streamtasks.drills.ledger import CommitMark, first_commits_past
from streamtasks.drills.offset_audit import OffsetAudit
from topology import TopicPartition

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_cooperative_handover_has_no_violation_and_measures_the_gap() -> None:
    ledger = OwnershipAudit([P0, P1], start_ms=0)
    ledger.assigned("a", [P0, P1], 100)
    ledger.revoked("a", [P1], 1_000)
    ledger.assigned("b", [P1], 1_250)
    report = ledger.report(2_000)
    assert report.violations == ()
    assert report.revocations == 1
    assert report.longest_unowned_ms == 250  # the first assignment gap (100) is shorter
    assert report.unowned_partition_ms == 100 + 100 + 250
    assert ledger.owners() == {P0: "a", P1: "b"}


def test_assigning_a_held_partition_is_a_double_ownership() -> None:
    ledger = OwnershipAudit([P0], start_ms=0)
    ledger.assigned("a", [P0], 10)
    ledger.assigned("b", [P0], 20)
    (violation,) = ledger.report(30).violations
    assert (violation.holder, violation.claimant, violation.at_ms) == ("a", "b", 20)


def test_a_dead_member_releases_and_open_gaps_count() -> None:
    ledger = OwnershipAudit([P0, P1], start_ms=0)
    ledger.assigned("a", [P0, P1], 0)
    ledger.member_gone("a", 500)
    ledger.assigned("b", [P0], 800)
    report = ledger.report(1_000)
    assert report.violations == ()
    assert report.longest_unowned_ms == 500  # P1 is still unowned since 500
    assert report.unowned_partition_ms == 300 + 500


def test_revoking_what_you_do_not_own_changes_nothing() -> None:
    ledger = OwnershipAudit([P0], start_ms=0)
    ledger.assigned("a", [P0], 0)
    ledger.revoked("b", [P0], 5)
    assert ledger.owners() == {P0: "a"}
    assert ledger.report(5).revocations == 0


def test_record_audit_counts_duplicates_and_losses() -> None:
    audit = RecordAudit()
    for rid in ("r1", "r2", "r3"):
        audit.produced(rid)
    for rid in ("r1", "r1", "r2", "zz"):
        audit.consumed(rid)
    assert audit.duplicates() == 1
    assert audit.lost() == ["r3"]
    assert audit.unexpected() == ["zz"]
    assert (audit.produced_count, audit.consumed_count) == (3, 4)


def test_a_lost_record_is_charged_to_the_first_commit_past_it() -> None:
    def mark(at: int, worker: str, by: str, partition: int, offset: int) -> CommitMark:
        return CommitMark(at_ms=at, worker=worker, by=by, partition=partition, offset=offset)

    commits = [
        mark(300, "w1", "streamtasks", 2, 400),  # later, and further: not the one that skipped 177
        mark(100, "w2", "faust", 2, 177),  # up to 176: does not pass 177
        mark(200, "w2", "faust", 2, 180),  # the first past 177..179
        mark(150, "w1", "streamtasks", 0, 50),
    ]
    passed = first_commits_past(["2:177", "2:179", "2:180", "0:49", "0:50", "1:3"], commits)
    assert passed["2:177"] == passed["2:179"] == commits[2]
    assert passed["2:180"] == commits[0]
    assert passed["0:49"] == commits[3]
    assert passed["0:50"] is None  # a commit *at* an offset has not passed it
    assert passed["1:3"] is None  # nobody committed that partition
    assert commits[2].describe(t0_ms=0) == "w2 (faust) committed offset 180 of partition 2 at 0.200s"


def test_the_offset_audit_remembers_each_acknowledged_records_key() -> None:
    class Meta:
        partition, offset = 2, 177

    class Producer:
        async def send(self, topic: str, *, key: bytes, value: bytes, partition: int | None) -> Any:
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            future.set_result(Meta())
            return future

    async def main() -> OffsetAudit:
        audit = OffsetAudit()
        await audit.send(Producer(), "t", key=b"k7", value=b"1")  # type: ignore[arg-type]
        await asyncio.sleep(0)  # the done callback runs
        return audit

    audit = asyncio.run(main())
    assert audit.lost() == ["2:177"]
    assert audit.key_of("2:177") == b"k7"
    assert audit.key_of("2:178") is None


def test_the_old_name_warns_and_is_the_audit() -> None:
    import streamtasks.drills

    with pytest.warns(DeprecationWarning, match="OwnershipAudit"):
        old = streamtasks.drills.OwnershipLedger
    assert old is OwnershipAudit


def test_a_release_read_after_the_claim_but_made_before_it_is_no_double_ownership() -> None:
    # An eager member revokes before its JoinGroup; a loaded harness may read that line after
    # the next generation's assignment of the same partition to another member.
    ledger = OwnershipAudit([P0], start_ms=0)
    ledger.assigned("w2", [P0], 5_600)
    ledger.assigned("w1", [P0], 6_129)  # read first ...
    assert len(ledger.report(6_129).violations) == 1
    ledger.revoked("w2", [P0], 5_900)  # ... though w2 let go 229 ms earlier
    report = ledger.report(7_000)
    assert report.violations == ()
    assert report.revocations == 1
    assert report.longest_unowned_ms == 5_600  # the first assignment; 229 ms between the two
    assert report.unowned_partition_ms == 5_600 + 229
    assert ledger.owners() == {P0: "w1"}


def test_a_release_after_the_claim_leaves_the_double_ownership() -> None:
    ledger = OwnershipAudit([P0], start_ms=0)
    ledger.assigned("w2", [P0], 5_600)
    ledger.assigned("w1", [P0], 6_129)
    ledger.revoked("w2", [P0], 6_129)  # w2 still held it when w1 was given it (same ms: not before)
    ledger.revoked("w3", [P0], 6_000)  # not the holder: withdraws nothing
    (violation,) = ledger.report(7_000).violations
    assert (violation.holder, violation.claimant, violation.at_ms) == ("w2", "w1", 6_129)
