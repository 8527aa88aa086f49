"""A lapsed assignment taken back resumes from the positions held at the loss
(:meth:`streamtasks.runtime.consumer.Consumer._taken_back`), not from the committed offsets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamtasks.membership.classic import AssignmentChanged, InvokeListener, ListenerKind
from streamtasks.runtime.consumer import TAKEN_BACK_METRIC, Consumer
from topology.ids import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class _Fetcher:
    """The aiokafka fetcher's assignment calls, recorded."""

    def __init__(self) -> None:
        self.seeks: dict[int, int] = {}

    def assign(self, partitions: list[Any]) -> None:
        pass

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks[tp.partition] = offset

    def pause(self, *tps: Any) -> None:
        pass

    def resume(self, *tps: Any) -> None:
        pass


def _consumer(
    keeps: bool = True, listener: Any = None, **settings: Any
) -> tuple[Consumer, _Fetcher, list[list[TopicPartition]]]:
    if not keeps:  # as the App's consumer: its tasks restore to the committed offsets
        settings["take_back_positions"] = False
    consumer = Consumer(["t"], listener=listener, bootstrap_servers="127.0.0.1:1", group_id="g", **settings)
    fetcher, reads = _Fetcher(), []

    class _Committed:
        """The committed offsets (10 for every partition), each read recorded."""

        def __init__(self) -> None:
            self.unstable: set[TopicPartition] = set()

        def forget(self, partitions: object) -> None:
            pass

        async def read(self, client: object, partitions: list[TopicPartition]) -> set[TopicPartition]:
            reads.append(list(partitions))
            consumer._positions.update({tp: 10 for tp in partitions})
            return set()

        def hold(self, client: object, unstable: object) -> None:
            pass

    consumer._fetcher = fetcher
    consumer._client = object()  # type: ignore[assignment]
    consumer._committed = _Committed()  # type: ignore[assignment]
    return consumer, fetcher, reads


async def _lapse_and_take_back(consumer: Consumer, back_at: int, assigned_at: int = 5) -> None:
    """Assigned at ``assigned_at``, lost at 5 (a KIP-848 epoch moves on without an assignment
    change: the lost callback's generation says where), given back at ``back_at``."""
    await consumer.assignment_changed(
        AssignmentChanged(generation=assigned_at, owned=(T0, T1), added=(T0, T1))
    )
    consumer._positions.update({T0: 15, T1: 17})  # records handed out since
    await consumer.invoke_listener(
        InvokeListener(invocation_id=1, kind=ListenerKind.LOST, partitions=(T0, T1), generation=5)
    )
    await consumer.assignment_changed(
        AssignmentChanged(generation=-1, owned=(), removed=(T0, T1), lost=(T0, T1))
    )
    assert consumer._positions == {}
    await consumer.assignment_changed(AssignmentChanged(generation=back_at, owned=(T0, T1), added=(T0, T1)))


@pytest.mark.parametrize("assigned_at", [5, 4])
def test_taken_back_in_the_same_generation_it_resumes_where_it_was_without_an_offset_fetch(
    assigned_at: int,
) -> None:
    consumer, fetcher, reads = _consumer()
    asyncio.run(_lapse_and_take_back(consumer, back_at=5, assigned_at=assigned_at))
    assert reads == [[T0, T1]]  # the first assignment's only
    assert consumer._positions == {T0: 15, T1: 17}
    assert fetcher.seeks == {0: 15, 1: 17}
    assert consumer.metrics()[TAKEN_BACK_METRIC] == 1.0


def test_a_later_generation_or_the_app_reads_the_committed_offsets_again() -> None:
    for consumer, fetcher, reads in (_consumer(), _consumer(keeps=False)):
        back_at = 6 if consumer.config.take_back_positions is None else 5
        asyncio.run(_lapse_and_take_back(consumer, back_at=back_at))
        assert reads == [[T0, T1], [T0, T1]]
        assert consumer._positions == {T0: 10, T1: 10}
        assert fetcher.seeks == {0: 10, 1: 10}
        # the App's take-back counts (it is one), a later generation's assignment does not
        assert consumer.metrics()[TAKEN_BACK_METRIC] == (0.0 if back_at == 6 else 1.0)


class _Losing:
    """A listener whose loss handling may have rolled back what was handed out."""

    def __init__(self) -> None:
        self.lost: list[tuple[TopicPartition, ...]] = []

    def on_partitions_lost(self, partitions: tuple[TopicPartition, ...]) -> None:
        self.lost.append(partitions)


class _Revoking:
    """Kafka's fallback: with no ``on_partitions_lost``, a loss calls ``on_partitions_revoked``."""

    def __init__(self) -> None:
        self.revoked: list[tuple[TopicPartition, ...]] = []

    def on_partitions_revoked(self, partitions: tuple[TopicPartition, ...]) -> None:
        self.revoked.append(partitions)


class _Assigned:
    def on_partitions_assigned(self, partitions: tuple[TopicPartition, ...]) -> None:
        pass


@pytest.mark.parametrize(
    ("listener", "setting", "kept"),
    [
        (_Losing(), None, False),  # a loss handler ran: the committed offsets again, as Kafka
        (_Revoking(), None, False),  # so did the revoked fallback
        (_Assigned(), None, True),  # nothing ran for the loss
        (_Losing(), True, True),  # the listener says its loss handling keeps what it processed
        (None, False, False),
    ],
)
def test_positions_are_kept_only_where_no_loss_handler_could_have_rolled_them_back(
    listener: Any, setting: bool | None, kept: bool
) -> None:
    extra = {} if setting is None else {"take_back_positions": setting}
    consumer, fetcher, reads = _consumer(listener=listener, **extra)
    asyncio.run(_lapse_and_take_back(consumer, back_at=5))
    assert fetcher.seeks == ({0: 15, 1: 17} if kept else {0: 10, 1: 10})
    assert reads == ([[T0, T1]] if kept else [[T0, T1], [T0, T1]])
    assert consumer.metrics()[TAKEN_BACK_METRIC] == 1.0
