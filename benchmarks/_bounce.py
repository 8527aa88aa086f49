"""A rolling bounce of a large KIP-848 group through the pure coordinator, simulated.

Used by ``benchmarks/coordinator.py --suite bounce``. Discrete events over simulated time (no
wall clock decides anything; seeded): the real ``GroupCoordinator`` and well-behaved members,
modelled after Kafka's consumer: a member heartbeats every ``heartbeat_interval_ms`` with only
its epoch, and at once, with its owned partitions, after its assignment changed (revocation and
assignment take no time: the callbacks are instant, so what is measured is the protocol and the
coordinator). One simulated network delay of 1-3 ms per message.

The group forms (every member starts within ``start_spread_ms``), converges, then restarts in
waves: each member of a wave leaves (epoch -1; a static member: -2) within ``spread_ms`` and a
new process joins ``down_ms`` later (dynamic: a new member id; static: the same instance id,
taking its old place). A wave has converged when every new process has joined and the
coordinator calls the group Stable (every member at the group epoch owning its target). Per
wave: simulated time from its first leave to convergence, partitions handed to a new owner,
records written, epoch bumps, targets computed, and the wall time spent inside the coordinator.
"""

from __future__ import annotations

import heapq
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from streamtasks.coordinator import (
    EMPTY_PARTITIONS,
    CoordinatorConfig,
    GroupCoordinator,
    GroupEpochRecord,
    GroupState,
    MetadataImage,
    Record,
    Result,
    TargetAssignmentMetadataRecord,
    TopicMetadata,
    TopicPartitionSet,
    record_key,
)
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = ["BounceConfig", "BounceRun", "WaveStats", "run_bounce"]

GROUP = "bounce"


@dataclass(frozen=True, slots=True, kw_only=True)
class BounceConfig:
    members: int = 10_000
    partitions: int = 100_000
    topics: int = 10
    wave_size: int = 1_000
    waves: int | None = None  # None: every member once
    static: bool = False
    assignment_interval_ms: int = 1_000
    heartbeat_interval_ms: int = 5_000
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    start_spread_ms: int = 10_000
    spread_ms: int = 1_000
    down_ms: int = 5_000
    seed: int = 0
    #: The interval while the group forms (the waves use ``assignment_interval_ms``: the group
    #: is then loaded from its log into a coordinator configured so).
    formation_interval_ms: int = 1_000


@dataclass(slots=True, kw_only=True)
class WaveStats:
    name: str
    converge_ms: int = 0
    moved: int = 0
    records: int = 0
    bumps: int = 0
    targets: int = 0
    heartbeats: int = 0
    coordinator_s: float = 0.0


@dataclass(slots=True, kw_only=True)
class BounceRun:
    config: BounceConfig
    formation: WaveStats
    waves: list[WaveStats]
    log_records: int
    compacted_records: int
    replay_s: float
    compacted_replay_s: float
    wall_s: float


@dataclass(slots=True)
class _Member:
    member_id: str
    instance_id: str | None
    epoch: int = 0
    owned: TopicPartitionSet = EMPTY_PARTITIONS
    reported: TopicPartitionSet | None = None
    alive: bool = True
    joined: bool = False
    in_flight: bool = False
    leaving: bool = False


@dataclass(order=True, slots=True)
class _Event:
    at: int
    seq: int
    kind: str = field(compare=False)
    member: _Member | None = field(compare=False, default=None)
    payload: Any = field(compare=False, default=None)


class _World:
    def __init__(self, config: BounceConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        per_topic = config.partitions // config.topics
        self.topics = tuple(
            TopicMetadata(topic_id=uuid.UUID(int=0xB0 + i), name=f"topic-{i}", num_partitions=per_topic)
            for i in range(config.topics)
        )
        self.names = tuple(t.name for t in self.topics)
        self.coordinator = self.new_coordinator(config.formation_interval_ms)
        self.log: list[Record] = []
        self.queue: list[_Event] = []
        self.seq = 0
        self.now = 0
        self.timer_at: int | None = None
        self.stats = WaveStats(name="")
        self.incarnations = 0
        self.owners: dict[tuple[uuid.UUID, int], str] = {}
        self.last_delivery: dict[tuple[str, str], int] = {}

    def new_coordinator(self, interval_ms: int) -> GroupCoordinator:
        c = self.config
        return GroupCoordinator(
            CoordinatorConfig(
                session_timeout_ms=c.session_timeout_ms,
                heartbeat_interval_ms=c.heartbeat_interval_ms,
                assignment_interval_ms=interval_ms,
            ),
            image=MetadataImage(self.topics),
        )

    def fail_over(self, interval_ms: int) -> None:
        """A new coordinator (another interval) loads the log; its resume write is applied."""
        self.coordinator = self.new_coordinator(interval_ms)
        self.timer_at = None
        self.write(lambda: self.coordinator.load(self.log, self.now))

    # -- plumbing --------------------------------------------------------------------------

    def at(self, when: int, kind: str, member: _Member | None = None, payload: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.queue, _Event(when, self.seq, kind, member, payload))

    def deliver(self, kind: str, member: _Member, payload: Any) -> None:
        """A message over the member's link: 1-3 ms, and FIFO per direction like a TCP
        connection (a heartbeat sent just before a leave is not overtaken by it)."""
        key = (member.member_id, kind)
        when = max(self.now + self.rng.randint(1, 3), self.last_delivery.get(key, 0))
        self.last_delivery[key] = when
        self.at(when, kind, member, payload)

    def write(self, call: Callable[[], Result[Any]]) -> Any:
        start = time.process_time()
        result = call()
        response = self.coordinator.apply(result)
        self.stats.coordinator_s += time.process_time() - start
        self.log += result.records
        self.stats.records += len(result.records)
        for record in result.records:
            if isinstance(record, GroupEpochRecord):
                self.stats.bumps += 1
            elif isinstance(record, TargetAssignmentMetadataRecord):
                self.stats.targets += 1
        self.arm_timer()
        return response

    def arm_timer(self) -> None:
        deadline = self.coordinator.next_deadline_ms()
        if deadline is not None and (self.timer_at is None or deadline < self.timer_at):
            self.timer_at = deadline
            self.at(deadline, "timer")

    # -- members ---------------------------------------------------------------------------

    def new_member(self, instance_id: str | None) -> _Member:
        self.incarnations += 1
        return _Member(member_id=f"member-{self.incarnations:06d}", instance_id=instance_id)

    def send(self, member: _Member, epoch: int | None = None) -> None:
        if not member.alive or member.in_flight:
            return
        c = self.config
        epoch = member.epoch if epoch is None else epoch
        if epoch == 0:
            request = ConsumerGroupHeartbeatRequest(
                group_id=GROUP,
                member_id=member.member_id,
                member_epoch=0,
                instance_id=member.instance_id,
                rebalance_timeout_ms=c.rebalance_timeout_ms,
                subscribed_topic_names=self.names,
                topic_partitions=(),
            )
        elif epoch < 0:
            request = ConsumerGroupHeartbeatRequest(
                group_id=GROUP, member_id=member.member_id, member_epoch=epoch, instance_id=member.instance_id
            )
        else:
            owned = None if member.reported == member.owned else member.owned
            request = ConsumerGroupHeartbeatRequest(
                group_id=GROUP,
                member_id=member.member_id,
                member_epoch=epoch,
                topic_partitions=None if owned is None else owned.to_wire(),
            )
            if owned is not None:
                member.reported = owned
        member.in_flight = True
        self.stats.heartbeats += 1
        self.deliver("request", member, request)

    def on_response(self, member: _Member, response: Any) -> None:
        member.in_flight = False
        if member.leaving or not member.alive:
            return
        if response.error is not KafkaErrorCode.NONE:
            raise SystemExit(f"{member.member_id}: heartbeat failed: {response.error_message}")
        member.joined = True
        member.epoch = response.member_epoch
        if response.assignment is not None:
            new = TopicPartitionSet.from_wire(response.assignment.topic_partitions)
            gained = new.difference(member.owned)
            if self.counting and gained:
                # a hand-over: the partition's owner (a static member's instance, else the
                # member) is not the one it had; a static member's own partitions coming back
                # to its restarted process are no move
                key = member.instance_id or member.member_id
                owners = self.owners
                for pair in gained.pairs():
                    if owners.get(pair) != key:
                        self.stats.moved += 1
                        owners[pair] = key
            elif gained:
                key = member.instance_id or member.member_id
                for pair in gained.pairs():
                    self.owners[pair] = key
            if new != member.owned:
                member.owned = new
                self.send(member)  # acknowledge at once
                return
        self.at(self.now + self.config.heartbeat_interval_ms, "heartbeat", member)

    # -- the loop --------------------------------------------------------------------------

    counting = False

    def run_until(self, done: Callable[[], bool]) -> None:
        while self.queue:
            event = heapq.heappop(self.queue)
            self.now = event.at
            kind, member = event.kind, event.member
            if kind == "timer":
                if self.timer_at == event.at:
                    self.timer_at = None
                for key in self.coordinator.expired_timers(self.now):
                    self.write(partial(self.coordinator.on_timer, key, self.now))
                self.arm_timer()
            elif kind == "request":
                assert member is not None
                response = self.write(partial(self.coordinator.heartbeat, event.payload, self.now))
                self.deliver("response", member, response)
            elif kind == "response":
                assert member is not None
                self.on_response(member, event.payload)
            elif kind == "heartbeat":
                assert member is not None
                self.send(member)
            elif kind == "start":
                assert member is not None
                self.send(member, 0)
            elif kind == "leave":
                assert member is not None
                member.in_flight = False
                member.leaving = True
                self.send(member, -2 if member.instance_id is not None else -1)
                member.alive = False
            if done():
                return
        raise SystemExit("the simulation ran out of events before converging")


def run_bounce(config: BounceConfig) -> BounceRun:
    wall = time.perf_counter()
    w = _World(config)
    members = [w.new_member(f"instance-{i:05d}" if config.static else None) for i in range(config.members)]
    for m in members:
        w.at(w.rng.randint(0, config.start_spread_ms), "start", m)
    group_state = w.coordinator.group_state

    def stable(joiners: list[_Member]) -> Callable[[], bool]:
        return lambda: all(m.joined for m in joiners) and group_state(GROUP) is GroupState.STABLE

    w.stats = formation = WaveStats(name="formation")
    w.counting = False
    start = 0
    w.run_until(stable(members))
    formation.converge_ms = w.now - start
    settled = w.now + config.heartbeat_interval_ms  # every member heartbeats once more
    w.run_until(lambda: w.now >= settled)
    if config.assignment_interval_ms != config.formation_interval_ms:
        w.fail_over(config.assignment_interval_ms)
    waves: list[WaveStats] = []
    order = list(members)
    count = config.waves if config.waves is not None else -(-len(order) // config.wave_size)
    for index in range(count):
        batch = order[index * config.wave_size : (index + 1) * config.wave_size]
        if not batch:
            break
        w.stats = stats = WaveStats(name=f"wave {index + 1}")
        w.counting = True
        start = w.now + 1
        joiners = []
        for old in batch:
            leave_at = start + w.rng.randint(0, config.spread_ms)
            w.at(leave_at, "leave", old)
            new = w.new_member(old.instance_id)
            joiners.append(new)
            w.at(leave_at + config.down_ms, "start", new)
        w.run_until(stable(joiners))
        stats.converge_ms = w.now - start
        waves.append(stats)

    fresh = GroupCoordinator(w.coordinator.config, image=w.coordinator.image)
    t = time.process_time()
    for record in w.log:
        fresh.replay(record)
    replay_s = time.process_time() - t
    last: dict[tuple[str, ...], Record] = {}
    for record in w.log:
        last.pop(record_key(record), None)
        last[record_key(record)] = record
    compacted = list(last.values())
    again = GroupCoordinator(w.coordinator.config, image=w.coordinator.image)
    t = time.process_time()
    for record in compacted:
        again.replay(record)
    compacted_s = time.process_time() - t
    if fresh.snapshot() != w.coordinator.snapshot() or again.snapshot() != w.coordinator.snapshot():
        raise SystemExit("replaying the log does not rebuild the group")
    return BounceRun(
        config=config,
        formation=formation,
        waves=waves,
        log_records=len(w.log),
        compacted_records=len(compacted),
        replay_s=replay_s,
        compacted_replay_s=compacted_s,
        wall_s=time.perf_counter() - wall,
    )
