"""MemberLoop's metadata refresh: at the interval while every subscribed topic is known, sooner
with a doubling backoff (lookup_backoff_ms's) while one is missing, reset once it is known."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from streamtasks.runtime import member_loop
from streamtasks.runtime.member_loop import MemberLoop


@dataclass
class _Config:
    topics: tuple[str, ...] = ("t",)
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 30_000


@dataclass
class _Member:
    config: _Config


class _Stop(Exception):
    pass


def _delays(
    missing_per_refresh: list[bool], retry_backoff_ms: int, monkeypatch: pytest.MonkeyPatch
) -> list[int]:
    """The sleeps (ms) of the metadata loop, the n-th refresh finding a topic missing or not."""
    loop = MemberLoop(
        _Member(_Config(retry_backoff_ms=retry_backoff_ms)),
        client=None,
        host=None,
        metadata_interval_ms=300_000,
    )  # type: ignore[arg-type]
    script = iter(missing_per_refresh)
    slept: list[int] = []

    async def sleep(seconds: float) -> None:
        slept.append(round(seconds * 1000))

    async def refresh() -> None:
        try:
            loop._missing_topics = ("t",) if next(script) else ()
        except StopIteration:
            raise _Stop from None

    monkeypatch.setattr(member_loop.asyncio, "sleep", sleep)
    monkeypatch.setattr(loop, "refresh_metadata", refresh)
    loop._missing_topics = ("t",)  # the first refresh (at start) did not find the topic
    with pytest.raises(_Stop):
        asyncio.run(loop._metadata_loop())
    return slept


def test_a_missing_topic_is_looked_up_again_with_a_doubling_backoff_then_at_the_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = [True] * 6 + [False, False, True, False]
    assert _delays(missing, 100, monkeypatch) == [
        100, 200, 400, 800, 1_000, 1_000, 1_000,  # missing: doubling up to one second
        300_000, 300_000,  # known: the interval
        100, 300_000,  # missing again: the backoff starts over
    ]  # fmt: skip


def test_the_backoff_starts_at_fifty_ms_and_never_caps_below_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _delays([True, True, False], 0, monkeypatch) == [50, 100, 200, 300_000]
    assert _delays([True, True, False], 2_000, monkeypatch) == [2_000, 2_000, 2_000, 300_000]
