"""The crash audit's account of a loss (:func:`streamtasks.drills.crash_audit.explain_loss`)."""

from __future__ import annotations

from typing import Any

from streamtasks.drills.crash_audit import explain_loss, uncommitted_partitions
from streamtasks.drills.offset_audit import OffsetAudit


def _commit(
    worker: str, at_ms: int, partition: int, offset: int, *, confirmed: bool = True
) -> dict[str, Any]:
    return {
        "worker": worker,
        "kind": "event",
        "event": "OffsetsCommitted",
        "at_ms": at_ms,
        "offsets": [["t", partition, offset]],
        "confirmed": confirmed,
        "wall_ms": at_ms,
    }


LINES: list[dict[str, Any]] = [
    {"worker": "w1", "kind": "started", "member_id": "m1", "wall_ms": 1_000},
    {
        "worker": "w1",
        "kind": "event",
        "event": "TaskCreated",
        "at_ms": 1_100,
        "task": "0_2",
        "role": "active",
    },
    {
        "worker": "w1",
        "kind": "event",
        "event": "TaskCreated",
        "at_ms": 1_100,
        "task": "0_3",
        "role": "active",
    },
    _commit("w1", 2_000, 2, 100),
    _commit("w1", 2_500, 3, 900),
    {
        "worker": "w2",
        "kind": "event",
        "event": "TaskCreated",
        "at_ms": 3_000,
        "task": "0_2",
        "role": "active",
    },
    _commit("w2", 3_500, 2, 180, confirmed=False),
    {
        "worker": "w2",
        "kind": "progress",
        "processed": 9,
        "fetch": {"fetch-rewinds-total": 1.0},
        "wall_ms": 3_600,
    },
]


def test_the_first_commit_past_a_lost_offset_is_marked_with_its_sender() -> None:
    lost = [f"2:{o}" for o in range(120, 150)]
    out = explain_loss(LINES, lost, reread={"2:120", "3:5"}, reader_skips=[])
    assert out[0] == "audit topic read again: 1 of the 30 missing offsets are there"
    assert out[1] == "w2's consumer at its last progress line: {'fetch-rewinds-total': 1.0}"
    assert out[2] == "partition 2, first lost offset 120, up to the first commit past it:"
    body = out[3:]
    assert [line.split("s ", 1)[1] for line in body] == [
        "w1 started",
        "w1 TaskCreated {'task': '0_2', 'role': 'active'}",
        "w1 commits 2@100 confirmed=True",
        "w2 TaskCreated {'task': '0_2', 'role': 'active'}",
        "w2 commits 2@180 confirmed=False <- past the first lost offset",
    ]
    assert body[0].strip().startswith("0.00s")
    assert body[-1].strip().startswith("2.50s")


def test_the_readers_own_jumps_are_reported() -> None:
    out = explain_loss(LINES, ["3:950"], reread=set(), reader_skips=[(0, 10, 12)])
    assert out[:2] == [
        "audit topic read again: 0 of the 1 missing offsets are there",
        "the audit reader's own reading jumped (partition, expected, read): [(0, 10, 12)]",
    ]
    assert "w1 commits 3@900 confirmed=True" in out[-1]


def _progress(worker: str, tasks: dict[str, str]) -> dict[str, Any]:
    return {"worker": worker, "kind": "progress", "processed": 1, "tasks": tasks, "wall_ms": 4_000}


def test_a_kill_replays_the_active_partitions_processed_at_or_past_their_last_commit() -> None:
    audit = OffsetAudit()
    for rid in ("2:179", "2:180", "3:899", "5:0"):
        audit.processed(rid)
    lines = [*LINES, _progress("w2", {"0_2": "active", "0_3": "active", "0_5": "active", "0_6": "active"})]
    # 2: 180 processed, last commit (w2's, handed over unconfirmed) says next is 180: replayed.
    # 3: committed up to 900, only 899 processed: nothing to replay. 5: never committed, 0
    # processed: replayed from the earliest. 6: nothing processed yet.
    assert uncommitted_partitions(lines, "w2", audit.highest_processed) == [2, 5]
    # A standby, or another worker's task, is not the victim's work to replay.
    standby = [*LINES, _progress("w2", {"0_2": "standby"}), _progress("w1", {"0_5": "active"})]
    assert uncommitted_partitions(standby, "w2", audit.highest_processed) == []
    # A commit past everything processed (a closing or revocation commit) leaves nothing.
    committed = [*lines, _commit("w2", 5_000, 2, 181), _commit("w2", 5_000, 5, 1)]
    assert uncommitted_partitions(committed, "w2", audit.highest_processed) == []
