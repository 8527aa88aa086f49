"""Scripted scenarios for the simulator tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic import ListenerKind
from streamtasks.sim.classic_side import RunResult, WorldSettings, classic_world
from streamtasks.sim.process import SimProcess
from streamtasks.sim.scenario import Scenario, Step, Timeouts
from streamtasks.sim.world import World
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


ClassicWorld = World[SimProcess, RunResult]


def world(scenario: Scenario, **settings: Any) -> ClassicWorld:
    return classic_world(scenario, WorldSettings(stop_on_violation=False, trace_limit=5_000, **settings))


def owned(w: ClassicWorld, name: str) -> frozenset[TopicPartition]:
    """What the current process of ``name`` owns, per its listener calls."""
    return w.ledger.owned_by(w.current[name].conn)


def listener_calls(
    w: ClassicWorld, name: str, kind: ListenerKind, *, after_ms: int = 0
) -> list[tuple[int, frozenset[TopicPartition]]]:
    """``(time, partitions)`` of every ``kind`` callback of ``name``'s processes (non-empty)."""
    return [
        (t, frozenset(parts))
        for t, conn, k, parts, _ in w.host.listener_log
        if conn.split("#")[0] == name and k is kind and t >= after_ms and parts
    ]
