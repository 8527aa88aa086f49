"""The ownership ledger and the figures it keeps."""

from __future__ import annotations

from streamtasks.sim.ledger import OwnershipLedger, ReleaseKind
from topology.ids import TopicPartition

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_orphan_time_counts_existing_partitions_without_owner() -> None:
    ledger = OwnershipLedger()
    ledger.set_partitions(frozenset({P0, P1}), 0)
    ledger.start_measuring(100)
    ledger.acquire("a#0", name="a", partitions=(P0,), now_ms=150, generation=1, start_offsets={})
    ledger.acquire("a#0", name="a", partitions=(P1,), now_ms=200, generation=1, start_offsets={})
    assert ledger.orphan_total_ms(300) == 50 + 100
    ledger.release("a#0", (P0,), 400, ReleaseKind.REVOKED, committed={P0: 12})
    assert ledger.orphan_total_ms(450) == 150 + 50
    assert ledger.last_release[P0].committed == 12
    assert ledger.revoked == 1


def test_moves_count_changes_of_owning_process_not_incarnation() -> None:
    ledger = OwnershipLedger()
    ledger.acquire("a#0", name="a", partitions=(P0,), now_ms=0, generation=1, start_offsets={})
    ledger.release_all("a#0", 10, ReleaseKind.CRASHED)
    ledger.acquire("a#1", name="a", partitions=(P0,), now_ms=20, generation=2, start_offsets={})
    assert ledger.moved == 0
    ledger.release_all("a#1", 30, ReleaseKind.LOST)
    ledger.acquire("b#0", name="b", partitions=(P0,), now_ms=40, generation=3, start_offsets={P0: 7})
    assert ledger.moved == 1
    assert ledger.lost == 1
    holding = ledger.holding("b#0", P0)
    assert holding is not None
    assert holding.start_offset == 7


def test_set_generation_updates_every_holding_of_a_process() -> None:
    ledger = OwnershipLedger()
    ledger.acquire("a#0", name="a", partitions=(P0, P1), now_ms=0, generation=1, start_offsets={})
    ledger.set_generation("a#0", 4)
    assert {h.generation for h in (*ledger.owners(P0), *ledger.owners(P1))} == {4}


def test_longest_orphan_stretch_is_the_longest_single_gap_open_ones_included() -> None:
    ledger = OwnershipLedger()
    ledger.set_partitions(frozenset({P0, P1}), 0)
    ledger.start_measuring(0)
    ledger.acquire("a#0", name="a", partitions=(P0, P1), now_ms=30, generation=1, start_offsets={})
    ledger.release("a#0", (P0,), 100, ReleaseKind.REVOKED)
    ledger.acquire("b#0", name="b", partitions=(P0,), now_ms=120, generation=2, start_offsets={})
    assert ledger.longest_orphan_stretch_ms(500) == 30
    ledger.release("a#0", (P1,), 200, ReleaseKind.CRASHED)
    assert ledger.longest_orphan_stretch_ms(260) == 60
    assert ledger.orphan_total_ms(260) == 30 + 30 + 20 + 60


def test_restore_records_whole_prefix_for_a_new_owner_the_gap_for_an_old_one() -> None:
    ledger = OwnershipLedger()
    ledger.acquire("a#0", name="a", partitions=(P0,), now_ms=0, generation=1, start_offsets={})
    ledger.release("a#0", (P0,), 10, ReleaseKind.REVOKED, committed={P0: 40})
    ledger.acquire("b#0", name="b", partitions=(P0,), now_ms=20, generation=2, start_offsets={P0: 40})
    assert (ledger.restore_records, ledger.warm_handovers) == (40, 0)
    ledger.release_all("b#0", 30, ReleaseKind.CRASHED)  # no accepted commit: its start offset
    ledger.acquire("a#1", name="a", partitions=(P0,), now_ms=40, generation=3, start_offsets={P0: 55})
    assert (ledger.restore_records, ledger.warm_handovers) == (40 + 15, 1)
    ledger.release_all("a#1", 50, ReleaseKind.CRASHED)
    ledger.acquire("b#1", name="b", partitions=(P0,), now_ms=60, generation=4, start_offsets={P0: 55})
    assert (ledger.restore_records, ledger.warm_handovers) == (40 + 15 + 15, 2)
