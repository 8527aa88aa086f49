"""Broker fault drills: a running group on a three-broker Apache Kafka cluster while brokers die.

The same run as the rolling-upgrade drills (:mod:`streamtasks.drills.rolling`: the workers, the
producer acknowledged per offset, the ownership ledger, the verdict), on one release (the
``--protocol``'s) and a :class:`~streamtasks.embedded.KafkaCluster`; after the group has
settled, the drill breaks the cluster:

* ``broker-crash``: kill -9 the group coordinator's broker mid-stream; it comes back after
  ``down_s``; then once more while a member is being bounced (its rejoin is the rebalance the
  crash lands in);
* ``leader-crash``: kill -9 the broker leading most input (and changelog) partitions;
* ``broker-rolling-restart``: every broker stopped (a controlled shutdown) and started in turn,
  one member bounced while each is down;
* ``broker-hang``: SIGSTOP the coordinator's broker for ``hang_s`` (longer than the workers'
  6 s session timeout), then SIGCONT.

After every fault the drill waits until the group has settled again, until processing has
resumed (every partition processed a record the broker acknowledged after the fault: the
*resume time*, reported per fault and as p50 / max) and until no partition is
under-replicated, before the next. Processing that does not resume within the settle timeout
is a problem (FAIL). The producer keeps going through the faults: a record the cluster never
acknowledged is not in the audit, one it acknowledged must be processed.

``members`` other than ``streamtasks`` puts a group of another library's consumers
(:mod:`streamtasks.drills.peer_worker`: ``confluent`` is librdkafka, cooperative-sticky) through
the same script: the reference rows.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from aiokafka import AIOKafkaProducer

from streamtasks.drills.catalog import DrillSpec, Stage, get_drill
from streamtasks.drills.ledger import FaultMark
from streamtasks.drills.offset_audit import OffsetAudit
from streamtasks.drills.peer_worker import CLIENTS as PEER_CLIENTS
from streamtasks.drills.rolling import DrillOptions, DrillResult, _now_ms, _Run, _Worker
from streamtasks.drills.stateful_app import record_for
from streamtasks.errors import BrokerError, ConfigError
from topology.names import changelog_topic

__all__ = [
    "PROTOCOLS",
    "FaultOptions",
    "fault_spec",
    "also_is",
    "resume_summary",
    "run_fault_drill",
]

#: How a fault's label names the metadata quorum's leader (:func:`also_is`).
ACTIVE_CONTROLLER = "the active controller"

#: ``--protocol``: the release the group runs through the faults.
PROTOCOLS: dict[str, Stage] = {
    "classic": Stage(label="classic (cooperative_sticky)", args=("--assignor", "cooperative_sticky")),
    "consumer": Stage(
        label="consumer (KIP-848, uniform)",
        args=("--group-protocol", "consumer", "--remote-assignor", "uniform"),
    ),
    "app": Stage(label="App (cooperative, one standby)", args=(), worker="app"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultOptions:
    #: A :data:`PROTOCOLS` key.
    protocol: str = "classic"
    #: ``streamtasks``, or a peer library (``confluent``, ``kafka-python``) for reference rows.
    members: str = "streamtasks"
    #: How long a killed broker stays down.
    down_s: float = 10.0
    #: How long a paused broker hangs (the workers' session timeout is 6 s).
    hang_s: float = 15.0
    #: Steady stream before the first fault.
    steady_s: float = 5.0


def fault_spec(name: str, protocol: str) -> DrillSpec:
    """The fault drill ``name`` (a catalog drill with ``fault``) on ``protocol``."""
    spec = get_drill(name)
    if not spec.fault:
        raise ConfigError(f"drill {name!r} is not a broker fault drill")
    stage = PROTOCOLS.get(protocol)
    if stage is None:
        raise ConfigError(f"--protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    return replace(spec, worker=stage.worker or "consumer", stages=(replace(stage, worker=None),))


def resume_summary(marks: list[FaultMark]) -> str:
    """``p50 / max`` of the faults' resume times (``never`` when one did not resume)."""
    if not marks:
        return "-"
    if any(m.resumed_ms is None for m in marks):
        return "never (see problems)"
    times = [m.resumed_ms for m in marks if m.resumed_ms is not None]
    return f"p50 {statistics.median(times):,.0f} ms / max {max(times):,} ms ({len(times)} faults)"


class _TimedAudit(OffsetAudit):
    """The per-offset audit, also timing when each partition processes past a mark."""

    def __init__(self) -> None:
        super().__init__()
        self.acked_max: dict[int, int] = {}
        #: Open marks: the fault's record and the offset per partition it waits to see passed.
        self.waiting: list[tuple[FaultMark, int, dict[int, int]]] = []
        #: The same, waiting for an acknowledgement past that offset on every partition.
        self.acking: list[tuple[FaultMark, int, dict[int, int]]] = []

    def _acked(self, key: bytes, future: asyncio.Future[object]) -> None:
        super()._acked(key, future)
        if not future.cancelled() and future.exception() is None:
            meta: Any = future.result()
            self.acked_max[meta.partition] = max(self.acked_max.get(meta.partition, -1), meta.offset)
            if self.acking:
                now = _now_ms()
                for mark, at_ms, left in list(self.acking):
                    if left.get(meta.partition, meta.offset) < meta.offset:
                        del left[meta.partition]
                        if not left:
                            mark.acked_ms = now - at_ms
                            self.acking.remove((mark, at_ms, left))

    def mark(self, mark: FaultMark, at_ms: int, partitions: int) -> None:
        offsets = {p: self.acked_max.get(p, -1) for p in range(partitions)}
        self.waiting.append((mark, at_ms, offsets))
        self.acking.append((mark, at_ms, dict(offsets)))

    def processed(self, record_id: str) -> None:
        super().processed(record_id)
        if not self.waiting:
            return
        part, _, off = record_id.partition(":")
        p, offset = int(part), int(off)
        now = _now_ms()
        for mark, at_ms, left in list(self.waiting):
            if left.get(p, offset) < offset:
                del left[p]
                if not left:
                    mark.resumed_ms = now - at_ms
                    self.waiting.remove((mark, at_ms, left))


def also_is(node: int, roles: Iterable[tuple[int, str]]) -> str:
    """What else the node a fault hits is, for the fault's label: ``"; also X and Y"`` for the
    roles ``(node id, what)`` it holds (the group's coordination, the active controller), else
    ``""``. Each makes the resume time longer (the coordinator moves; the metadata quorum
    elects a new controller before the dead broker is fenced), which a report's reader could
    not tell otherwise."""
    held = [what for at, what in roles if at == node]
    return f"; also {' and '.join(held)}" if held else ""


class _FaultRun(_Run):
    def __init__(
        self,
        spec: DrillSpec,
        options: DrillOptions,
        fault: FaultOptions,
        cluster: Any,
        say: Callable[[str], None],
    ) -> None:
        if fault.members != "streamtasks":
            if fault.members not in PEER_CLIENTS:
                raise ConfigError(f"--library must be streamtasks or one of {', '.join(PEER_CLIENTS)}")
            if spec.worker != "consumer":
                raise ConfigError("a peer library's group runs the consumer protocols only, not the App")
            if fault.protocol == "consumer" and fault.members == "kafka-python":
                raise ConfigError("kafka-python has no group.protocol=consumer (KIP-848)")
        super().__init__(spec, options, cluster.bootstrap_servers, say)
        self.cluster, self.fault = cluster, fault
        self.audit = self.timed = _TimedAudit()
        self.acked_seq: dict[str, int] = {}
        self.result.members_client = fault.members

    def _argv(self, stage: Stage, state_root: str, name: str) -> tuple[str, list[str]]:
        if self.fault.members == "streamtasks":
            return super()._argv(stage, state_root, name)
        protocol = "consumer" if self.fault.protocol == "consumer" else "classic"
        args = ["--client", self.fault.members, "--bootstrap-servers", self.group_bootstrap,
                "--group", self.group, "--topic", self.topic, "--assignor", "cooperative-sticky",
                "--group-protocol", protocol, *self.client_args]  # fmt: skip
        return "streamtasks.drills.peer_worker", args

    async def send_one(self, producer: AIOKafkaProducer, seq: int) -> bool:
        """As the rolling drills' send, through the faults: a send the cluster refuses is not
        acknowledged (not in the audit) and the stream goes on after a pause; the state
        check's expected values are those of acknowledged records."""
        key, value = record_for(seq, self.o.keys)
        try:
            future = await self.audit.send(producer, self.topic, key=key, value=value)
        except Exception as exc:  # no metadata for the partition, buffer full: not sent
            self.say(f"  send failed: {exc!r}")
            await asyncio.sleep(0.5)
            return False
        future.add_done_callback(functools.partial(self._acked, key=key.decode(), seq=seq))
        return True

    def _acked(self, future: asyncio.Future[Any], *, key: str, seq: int) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        self.produced_per_key[key] = self.produced_per_key.get(key, 0) + 1
        if seq >= self.acked_seq.get(key, -1):
            self.acked_seq[key] = self.last_value[key] = seq

    # -- the faults ---------------------------------------------------------------------------

    async def _script(self, names: list[str], state_root: str) -> None:
        await super()._script(names, state_root)  # start every worker, wait until settled
        await asyncio.sleep(self.fault.steady_s)
        script = {
            "broker-crash": self._broker_crash,
            "leader-crash": self._leader_crash,
            "broker-rolling-restart": self._rolling_restart,
            "broker-hang": self._broker_hang,
        }[self.spec.name]
        try:
            await script(names, state_root)
        except BrokerError as exc:  # the cluster did not come back: the verdict still runs
            self.result.problems.append(f"the cluster: {exc}")
            self.say(f"  the cluster: {exc}")

    async def _ask(self, call: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(call, *args)

    async def _restart(self, broker: Any) -> None:
        """Start a broker again: the process is launched from this (the event loop's) thread,
        which lives as long as the cluster should. Linux ties a child's parent-death signal to
        the thread that forked it (streamtasks.embedded._process), so a broker launched from a
        worker thread of ``asyncio.to_thread`` is killed when that thread ends; only the wait
        until it serves runs in a thread."""
        started = time.monotonic()
        broker.launch()
        await self._ask(broker.wait_ready)
        self.say(
            f"  node {broker.node_id} is back (serving {time.monotonic() - started:.1f} s after its start)"
        )

    def _mark(self, label: str, node: int) -> FaultMark:
        at = _now_ms()
        mark = FaultMark(label=label, node=node, at_s=self.seconds(at))
        self.result.faults.append(mark)
        self.result.markers.append((mark.at_s, label))
        self.timed.mark(mark, at, self.o.partitions)
        self.say(f"  {label}")
        return mark

    async def _recovered(self, mark: FaultMark, names: list[str]) -> None:
        """Wait until the group settled, processing resumed and the cluster is fully replicated."""
        await self.wait_settled(names, f"the group after: {mark.label}")
        deadline = time.monotonic() + self.o.settle_timeout_s
        while mark.resumed_ms is None and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        if mark.resumed_ms is None:
            self.result.problems.append(
                f"processing did not resume within {self.o.settle_timeout_s:g} s: {mark.label}"
            )
        else:
            self.say(f"  processing resumed {mark.resumed_ms:,} ms after: {mark.label}")
        await self._ask(functools.partial(self.cluster.wait_under_replicated, 0, topics=self._replicated()))

    def _replicated(self) -> list[str]:
        """The topics the drill needs fully replicated before its next fault: its data and
        where the group's offsets are; other topics of a shared cluster (a test session's)
        are not its to wait for."""
        topics = self._data_topics()
        if self.audited_by_topic:
            topics.append(self.audit_topic)
        # The group's offsets: in the coordinator's record topic, or in __consumer_offsets
        # (which a cluster has only once a group used it: not with the coordinator in front).
        topics.append("__consumer_offsets" if self.coordinator is None else self.coordinator.topic)
        return topics

    async def _bounce(self, name: str, state_root: str) -> None:
        await self.stop_worker(name)
        module, argv = self._argv(self.spec.stages[0], state_root, name)
        self.workers[name] = _Worker(name, module, argv, self.on_line)
        await self.workers[name].start()

    async def _crash(self, node: int, label: str, names: list[str]) -> None:
        broker = self.cluster.broker(node)
        mark = self._mark(label, node)
        await self._ask(broker.kill)
        await asyncio.sleep(self.fault.down_s)
        await self._restart(broker)
        await self._recovered(mark, names)

    async def _controller(self) -> tuple[int, str]:
        """The active controller's node (-1 when the cluster could not say), for :func:`also_is`."""
        try:
            return await self._ask(self.cluster.active_controller), ACTIVE_CONTROLLER
        except BrokerError:
            return -1, ACTIVE_CONTROLLER

    async def _coordinator_node(self) -> tuple[int, str]:
        """The broker the group's coordination lives on, and what it is: the cluster's group
        coordinator, or (with ``streamtasks coordinator`` in front) the leader of the
        coordinator's record topic, where its groups and committed offsets are kept."""
        if self.coordinator is None:
            return await self._ask(self.cluster.coordinator_of, self.group), "the group coordinator"
        leaders = await self._ask(self.cluster.leaders, [self.coordinator.topic])
        return leaders[(self.coordinator.topic, 0)], "leading streamtasks coordinator's record topic"

    async def _broker_crash(self, names: list[str], state_root: str) -> None:
        async def mid_stream() -> None:
            node, what = await self._coordinator_node()
            also = also_is(node, [await self._controller()])
            await self._crash(node, f"kill -9 node {node} ({what}{also}), mid-stream", names)

        async def mid_rebalance() -> None:
            node, what = await self._coordinator_node()
            also = also_is(node, [await self._controller()])
            bounced = names[0]
            await self._bounce(bounced, state_root)
            await asyncio.sleep(1.0)  # the new process is joining: the group is rebalancing
            label = f"kill -9 node {node} ({what}{also}) while {bounced} rejoins"
            await self._crash(node, label, names)

        await self.phase("crash the coordinator's broker mid-stream", mid_stream)
        await self.phase("crash the coordinator's broker during a member's bounce", mid_rebalance)

    def _data_topics(self) -> list[str]:
        topics = [self.topic]
        if self.spec.worker == "app":
            topics += [changelog_topic(self.group, "counts"), changelog_topic(self.group, "latest")]
        return topics

    async def _leader_crash(self, names: list[str], state_root: str) -> None:
        async def crash() -> None:
            leaders = await self._ask(self.cluster.leaders, self._data_topics())
            counts = Counter(node for node in leaders.values() if node >= 0)
            node, led = counts.most_common(1)[0]
            also = also_is(node, [await self._coordinator_node(), await self._controller()])
            label = f"kill -9 node {node} (leads {led} of {len(leaders)} data partitions{also})"
            await self._crash(node, label, names)

        await self.phase("crash the broker leading most partitions", crash)

    async def _rolling_restart(self, names: list[str], state_root: str) -> None:
        async def roll() -> None:
            for index, broker in enumerate(self.cluster.brokers):
                bounced = names[index % len(names)]
                mark = self._mark(
                    f"stop node {broker.node_id} (controlled), bounce {bounced}", broker.node_id
                )
                await self._ask(broker.stop)
                await self._bounce(bounced, state_root)
                await self._restart(broker)
                await self._recovered(mark, names)

        await self.phase("restart every broker in turn, bouncing members", roll)

    async def _broker_hang(self, names: list[str], state_root: str) -> None:
        async def hang() -> None:
            node, what = await self._coordinator_node()
            what += also_is(node, [await self._controller()])
            broker = self.cluster.broker(node)
            mark = self._mark(f"SIGSTOP node {node} ({what}) for {self.fault.hang_s:g} s", node)
            await self._ask(broker.pause)
            await asyncio.sleep(self.fault.hang_s)
            await self._ask(broker.resume)
            self.say(f"  node {node} resumed")
            await self._recovered(mark, names)

        await self.phase("hang the coordinator's broker", hang)

    async def _verdict(self) -> None:
        await super()._verdict()
        self.result.resume = resume_summary(self.result.faults)


async def run_fault_drill(
    spec: DrillSpec, options: DrillOptions, fault: FaultOptions, cluster: Any, say: Callable[[str], None]
) -> DrillResult:
    """Run the fault drill ``spec`` (:func:`fault_spec`) on ``cluster`` (a started
    :class:`~streamtasks.embedded.KafkaCluster`); see the module docstring."""
    return await _FaultRun(spec, options, fault, cluster, say).run()
