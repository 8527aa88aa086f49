"""Scripted scenarios for the simulator tests."""

from __future__ import annotations

from collections.abc import Iterable

from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic import ListenerKind
from streamtasks.sim.scenario import Scenario, Step, Timeouts
from streamtasks.sim.world import World, WorldSettings
from tests.ids import tp, tps
from topology.ids import TopicPartition

__all__ = ["COOPERATIVE", "EAGER", "listener_calls", "owned", "scripted", "tp", "tps", "world"]

COOPERATIVE = RebalanceProtocol.COOPERATIVE
EAGER = RebalanceProtocol.EAGER


def scripted(
    steps: Iterable[Step],
    *,
    topics: tuple[tuple[str, int], ...] = (("foo", 3),),
    protocol: RebalanceProtocol = COOPERATIVE,
    assignors: tuple[str, ...] | None = None,
    timeouts: Timeouts | None = None,
    marker: bool = True,
    seed: int = 7,
) -> Scenario:
    if assignors is None:
        assignors = ("cooperative_sticky",) if protocol is COOPERATIVE else ("cooperative_sticky", "range")
    return Scenario(
        seed=seed,
        protocol=protocol,
        topics=topics,
        assignors=assignors,
        steps=tuple(sorted(steps, key=lambda s: s.at_ms)),
        timeouts=timeouts or Timeouts(),
        generation_marker=marker,
    )


def world(scenario: Scenario, **settings: object) -> World:
    return World(scenario, WorldSettings(stop_on_violation=False, trace_limit=5_000, **settings))  # type: ignore[arg-type]


def owned(w: World, name: str) -> frozenset[TopicPartition]:
    """What the current process of ``name`` owns, per its listener calls."""
    return w.ledger.owned_by(w.current[name].conn)


def listener_calls(
    w: World, name: str, kind: ListenerKind, *, after_ms: int = 0
) -> list[tuple[int, frozenset[TopicPartition]]]:
    """``(time, partitions)`` of every ``kind`` callback of ``name``'s processes (non-empty)."""
    return [
        (t, frozenset(parts))
        for t, conn, k, parts, _ in w.listener_log
        if conn.split("#")[0] == name and k is kind and t >= after_ms and parts
    ]
