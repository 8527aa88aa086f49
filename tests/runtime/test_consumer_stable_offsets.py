"""``read_committed``: a new partition whose committed offset a pending transaction holds
(KIP-447's ``require_stable``) stays owned but unfetched until the offset is stable."""

from __future__ import annotations

import asyncio
from typing import Any

from streamtasks.protocol.classic_group import OffsetFetchRequest, OffsetFetchResponse
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.consumer import Consumer
from tests.runtime.test_consumer_fetch import A0, A1, T0, T1, ScriptedFetcher, drain

E = KafkaErrorCode


class ScriptedCoordinator:
    """Answers OffsetFetch from a script: one answer per request, in order."""

    def __init__(self, answers: list[dict[Any, tuple[int, KafkaErrorCode]]]) -> None:
        self.answers = answers
        self.requests: list[OffsetFetchRequest] = []

    async def send(self, request: OffsetFetchRequest, **_: Any) -> OffsetFetchResponse:
        self.requests.append(request)
        answer = self.answers.pop(0)
        return OffsetFetchResponse(
            error=E.NONE,
            offsets=tuple((tp, *answer[tp]) for tp in request.partitions if tp in answer),
        )


def test_an_unstable_partition_is_fetched_only_once_its_offset_is_stable() -> None:
    fetcher = ScriptedFetcher({A0: list(range(6)), A1: list(range(8))})
    coordinator = ScriptedCoordinator(
        [
            {T0: (3, E.NONE), T1: (-1, E.UNSTABLE_OFFSET_COMMIT)},
            {T1: (-1, E.UNSTABLE_OFFSET_COMMIT)},
            {T1: (5, E.NONE)},
        ]
    )
    consumer = Consumer(
        ["t"],
        bootstrap_servers="127.0.0.1:1",
        group_id="g",
        isolation_level="read_committed",
        retry_backoff_ms=0,
    )
    consumer._fetcher = fetcher
    consumer._client = coordinator  # type: ignore[assignment]
    consumer._owned = frozenset({T0, T1})
    fetcher.assign([A0, A1])

    async def scenario() -> dict[Any, list[int]]:
        unstable = await consumer._committed.read(coordinator, [T0, T1])  # type: ignore[arg-type]
        assert unstable == {T1}
        consumer._committed.unstable.update(unstable)
        fetcher.seek(A0, consumer._positions[T0])
        consumer._refresh_fetchable()
        assert fetcher.paused == {A1}
        before = await drain(consumer)
        assert before == {T0: [3, 4, 5]}  # the held partition is neither fetched nor handed out
        await consumer._committed._wait(coordinator)  # type: ignore[arg-type]
        return await drain(consumer)

    after = asyncio.run(scenario())
    assert after == {T1: [5, 6, 7]}  # from the offset the transaction committed
    assert all(r.require_stable for r in coordinator.requests)
    assert [r.partitions for r in coordinator.requests] == [(T0, T1), (T1,), (T1,)]


def test_read_uncommitted_does_not_ask_for_stable_offsets() -> None:
    coordinator = ScriptedCoordinator([{T0: (2, E.NONE)}])
    consumer = Consumer(["t"], bootstrap_servers="127.0.0.1:1", group_id="g")
    consumer._client = coordinator  # type: ignore[assignment]
    assert asyncio.run(consumer._committed.read(coordinator, [T0])) == set()  # type: ignore[arg-type]
    assert consumer._positions == {T0: 2}
    assert coordinator.requests[0].require_stable is False
