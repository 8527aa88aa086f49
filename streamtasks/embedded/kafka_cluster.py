"""An N-broker Apache Kafka cluster you can break: :func:`start_cluster` and :class:`KafkaCluster`.

Every node is one combined broker+controller KRaft process (:class:`ClusterBroker`, an
:class:`~streamtasks.embedded.KafkaBroker` with fixed ports and a data directory that outlives
the process), all of them voters of one controller quorum, so the crash of one of three keeps a
quorum. The replication settings are a production cluster's (:func:`cluster_settings`):
default, ``__consumer_offsets`` and transaction-state replication factor 3 and
``min.insync.replicas=2``::

    with start_cluster(brokers=3) as cluster:
        cluster.create_topics({"orders": 6})
        victim = cluster.broker(cluster.leaders(["orders"])[("orders", 0)])
        victim.kill()                 # SIGKILL; stop() is SIGTERM and a controlled shutdown
        ...
        victim.start()                # same ports, same data
        cluster.wait_isr_full(["orders"])

Each node listens three times on loopback: ``PLAINTEXT`` for clients, ``INTERNAL`` for
replication between brokers, ``CONTROLLER`` for the quorum. With ``proxied=True`` a
:class:`~streamtasks.embedded.fault_proxy.FaultProxy` stands in front of every ``PLAINTEXT``
listener and the brokers advertise the proxy's address, so clients only ever reach a broker
through its proxy (delay, dropped or black-holed connections) while replication and the quorum
stay direct. The cluster helpers (:meth:`KafkaCluster.coordinator_of`,
:meth:`KafkaCluster.leaders`, ...) talk to the brokers directly.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Self, TypeVar

from kio.schema.describe_quorum.v0.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.describe_quorum.v0.response import DescribeQuorumResponse
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32

from streamtasks.embedded._process import unused_port
from streamtasks.embedded.cluster import create_topics
from streamtasks.embedded.cluster_broker import ClusterBroker, broker_ids, cluster_settings, metadata_call
from streamtasks.embedded.fault_proxy import FaultProxy
from streamtasks.embedded.kafka_broker import random_uuid
from streamtasks.errors import BrokerError
from streamtasks.runtime.admin import TopicSpec
from streamtasks.runtime.blocking import BlockingConnection

__all__ = [
    "GROUP_KEY",
    "TRANSACTION_KEY",
    "ClusterBroker",
    "KafkaCluster",
    "TopicPartitionKey",
    "start_cluster",
]

#: ``(topic, partition)``.
TopicPartitionKey = tuple[str, int]
#: FindCoordinator's key types.
GROUP_KEY, TRANSACTION_KEY = 0, 1
_COORDINATOR_NOT_AVAILABLE, _NOT_COORDINATOR = 15, 16

T = TypeVar("T")


class KafkaCluster:
    """``brokers`` Apache Kafka nodes (ids 1..N) on loopback; see the module docstring.

    ``configs`` adds or overrides broker settings on every node; ``directory`` keeps the nodes'
    data and logs (``node-<id>/server.log``) there instead of a temporary directory removed by
    :meth:`stop`."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        host: str = "127.0.0.1",
        configs: Mapping[str, str] | None = None,
        proxied: bool = False,
        directory: str | os.PathLike[str] | None = None,
        startup_timeout_s: float = 180.0,
    ) -> None:
        if brokers < 1:
            raise BrokerError(f"a cluster needs at least one broker, not {brokers}")
        self.host = host
        self.proxied = proxied
        self._timeout = startup_timeout_s
        self._own_dir = directory is None
        self.directory = (
            Path(directory) if directory else Path(tempfile.mkdtemp(prefix="streamtasks-cluster-"))
        )
        taken: set[int] = set()
        ports = [
            {name: unused_port(host, taken) for name in ("PLAINTEXT", "INTERNAL", "CONTROLLER")}
            for _ in range(brokers)
        ]
        quorum = ",".join(f"{host}:{p['CONTROLLER']}" for p in ports)
        dir_ids = [random_uuid() for _ in ports]
        initial = ",".join(
            f"{i}@{host}:{p['CONTROLLER']}:{d}"
            for i, (p, d) in enumerate(zip(ports, dir_ids, strict=True), 1)
        )
        settings = {**cluster_settings(brokers), **(configs or {})}
        cluster_id = random_uuid()
        self.brokers: list[ClusterBroker] = [
            ClusterBroker(
                node_id=i,
                host=host,
                ports=p,
                quorum=quorum,
                initial_controllers=initial,
                cluster_id=cluster_id,
                directory=self.directory / f"node-{i}",
                configs=settings,
                proxy=FaultProxy(host, p["PLAINTEXT"], listen_port=unused_port(host, taken))
                if proxied
                else None,
                startup_timeout_s=startup_timeout_s,
            )
            for i, p in enumerate(ports, 1)
        ]
        self.cluster_id = cluster_id

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's client address (its proxy's when proxied), comma-separated."""
        return ",".join(b.address for b in self.brokers)

    @property
    def direct_bootstrap_servers(self) -> str:
        """Every broker's ``INTERNAL`` listener: clients bootstrapped here talk to the brokers
        directly (a broker advertises the listener a request came in on), around the proxies."""
        return ",".join(f"{b.host}:{b.internal_port}" for b in self.brokers)

    def broker(self, node_id: int) -> ClusterBroker:
        for b in self.brokers:
            if b.node_id == node_id:
                return b
        raise BrokerError(f"the cluster has no broker {node_id} (it has {[b.node_id for b in self.brokers]})")

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> Self:
        """Format every node's storage (side by side), start every process, start the proxies,
        and wait until every broker is in the cluster's metadata."""
        try:
            with ThreadPoolExecutor(max_workers=len(self.brokers)) as pool:
                list(pool.map(lambda b: b.format_storage(), self.brokers))
            for b in self.brokers:
                if b.proxy is not None:
                    b.proxy.start()
                b.launch()  # from this thread: the parent-death signal is tied to it
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        atexit.register(self.stop)
        return self

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until every running broker serves the cluster and the metadata lists them all."""
        deadline = time.monotonic() + (self._timeout if timeout_s is None else timeout_s)
        up = [b for b in self.brokers if b.running and not b.paused]
        for b in up:
            b.wait_ready(max(1.0, deadline - time.monotonic()))
        wanted = {b.node_id for b in up}
        self._until(
            lambda: wanted <= broker_ids(self.metadata(())), deadline, f"brokers {sorted(wanted)} registered"
        )

    def recover(self, *, timeout_s: float = 120.0) -> None:
        """Undo every fault: heal the proxies (no delay), resume paused brokers, start stopped or
        killed ones, and wait until every broker serves and no partition is under-replicated."""
        deadline = time.monotonic() + timeout_s
        for b in self.brokers:
            if b.proxy is not None:
                b.proxy.set_delay(0.0)
                b.proxy.heal()
            if b.paused:
                b.resume()
            b.launch()
        self.wait_ready(max(1.0, deadline - time.monotonic()))
        self.wait_under_replicated(0, timeout_s=max(1.0, deadline - time.monotonic()))

    def stop(self) -> None:
        """Stop every broker and every proxy, and remove the data (unless ``directory`` was
        given). Kept data is shut down cleanly (SIGTERM to all at once, SIGKILL 10 s later: the
        last brokers of a cluster going down cannot finish a controlled shutdown); data about to
        be removed is not worth that wait (SIGKILL: 10-15 s of every test session)."""
        if self._own_dir:
            for b in self.brokers:
                b.kill()
        with ThreadPoolExecutor(max_workers=len(self.brokers)) as pool:
            list(pool.map(lambda b: b.stop(timeout_s=10.0), self.brokers))
        for b in self.brokers:
            if b.proxy is not None:
                b.proxy.stop()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- over the wire -------------------------------------------------------------------

    def _ask(self, call: Callable[[BlockingConnection], T]) -> T:
        """``call`` on a connection to the first broker that is up (directly, not proxied)."""
        errors = []
        for b in self.brokers:
            if not b.running or b.paused:
                continue
            try:
                with BlockingConnection(b.host, b.port, timeout_s=5.0) as conn:
                    return call(conn)
            except BrokerError as exc:
                errors.append(f"node {b.node_id}: {exc}")
        raise BrokerError("no broker of the cluster answered: " + ("; ".join(errors) or "none is running"))

    def metadata(self, topics: Iterable[str] | None = None) -> MetadataResponse:
        """Metadata for ``topics`` (every topic, the internal ones too, when None)."""
        names = None if topics is None else list(topics)
        return self._ask(lambda conn: metadata_call(conn, names))

    def create_topics(
        self, topics: Mapping[str, int] | Iterable[TopicSpec], *, exist_ok: bool = True
    ) -> None:
        """Create topics (replication factor: the cluster's default unless a spec says)."""
        b = next((b for b in self.brokers if b.running and not b.paused), None)
        if b is None:
            raise BrokerError("no broker of the cluster is running")
        create_topics(b.host, b.port, topics, exist_ok=exist_ok)

    def coordinator_of(
        self, group_id: str, *, key_type: int = GROUP_KEY, not_on: int | None = None, timeout_s: float = 30.0
    ) -> int:
        """The node id of ``group_id``'s coordinator (FindCoordinator; ``key_type`` 1 for a
        transactional id), waiting while the cluster answers COORDINATOR_NOT_AVAILABLE, and
        while it still names broker ``not_on`` (a killed broker leads its partitions until the
        controller fences it)."""
        request = FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=(group_id,))
        deadline = time.monotonic() + timeout_s
        while True:
            coordinator = self._ask(lambda conn: conn.call(request, FindCoordinatorResponse)).coordinators[0]
            code = coordinator.error_code.value
            if code == 0 and int(coordinator.node_id) != not_on:
                return int(coordinator.node_id)
            if code not in (0, _COORDINATOR_NOT_AVAILABLE, _NOT_COORDINATOR) or time.monotonic() > deadline:
                why = coordinator.error_code.name if code else f"still on broker {not_on}"
                raise BrokerError(f"FindCoordinator for {group_id!r}: {why}")
            time.sleep(0.1)

    def active_controller(self) -> int:
        """The node id of the active controller (the leader of the metadata quorum, which every
        node of this cluster votes in): DescribeQuorum, which a broker forwards to it. Killing
        that node makes the quorum elect another before the dead broker can be fenced, so its
        partitions move later than when another node dies."""
        request = DescribeQuorumRequest(
            topics=(
                TopicData(
                    topic_name=TopicName("__cluster_metadata"),
                    partitions=(PartitionData(partition_index=i32(0)),),
                ),
            )
        )
        response = self._ask(lambda conn: conn.call(request, DescribeQuorumResponse))
        if response.error_code.value != 0:
            raise BrokerError(f"DescribeQuorum: {response.error_code.name}")
        partition = response.topics[0].partitions[0]
        if partition.error_code.value != 0:
            raise BrokerError(f"DescribeQuorum: {partition.error_code.name}")
        return int(partition.leader_id)

    def leaders(self, topics: Iterable[str]) -> dict[TopicPartitionKey, int]:
        """``(topic, partition) → leader node id`` (-1 while a partition has none)."""
        return {tp: leader for tp, (leader, _, _) in _partitions(self.metadata(topics)).items()}

    def under_replicated(self, topics: Iterable[str] | None = None) -> list[TopicPartitionKey]:
        """Partitions whose in-sync replicas are fewer than their replicas (all topics when None)."""
        parts = _partitions(self.metadata(topics))
        return sorted(tp for tp, (_, replicas, isr) in parts.items() if len(isr) < len(replicas))

    def wait_under_replicated(
        self, count: int = 0, *, topics: Iterable[str] | None = None, timeout_s: float = 90.0
    ) -> None:
        """Wait until at most ``count`` partitions of ``topics`` (all topics when None) are
        under-replicated."""
        names = None if topics is None else list(topics)
        self._until(
            lambda: len(self.under_replicated(names)) <= count,
            time.monotonic() + timeout_s,
            f"at most {count} under-replicated partitions" + (f" of {names}" if names else ""),
            lambda: f"under-replicated: {self.under_replicated(names)}",
        )

    def wait_isr_full(self, topics: Iterable[str], *, timeout_s: float = 90.0) -> None:
        """Wait until every partition of ``topics`` has a leader and all its replicas in sync."""
        names = list(topics)

        def full() -> bool:
            parts = _partitions(self.metadata(names))
            return bool(parts) and all(
                leader >= 0 and set(isr) == set(replicas) for leader, replicas, isr in parts.values()
            )

        self._until(
            full,
            time.monotonic() + timeout_s,
            f"ISR full for {names}",
            lambda: f"under-replicated: {self.under_replicated(names)}",
        )

    def _until(
        self, done: Callable[[], bool], deadline: float, what: str, why: Callable[[], str] | None = None
    ) -> None:
        last = ""
        while True:
            try:
                if done():
                    return
            except BrokerError as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                detail = last
                with contextlib.suppress(BrokerError):
                    detail = why() if why is not None else last
                raise BrokerError(f"the cluster did not reach {what} in time ({detail or 'no answer'})")
            time.sleep(0.1)


def start_cluster(brokers: int = 3, **options: object) -> KafkaCluster:
    """Start a :class:`KafkaCluster` of ``brokers`` nodes (keywords: see the class) and wait
    until every broker serves it."""
    return KafkaCluster(brokers, **options).start()  # type: ignore[arg-type]


def _partitions(
    response: MetadataResponse,
) -> dict[TopicPartitionKey, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """``(topic, partition) → (leader, replicas, isr)``; a topic the broker does not know raises."""
    out: dict[TopicPartitionKey, tuple[int, tuple[int, ...], tuple[int, ...]]] = {}
    for topic in response.topics:
        if topic.error_code.value != 0:
            raise BrokerError(f"metadata for {topic.name}: {topic.error_code.name}")
        for p in topic.partitions:
            out[(str(topic.name), int(p.partition_index))] = (
                int(p.leader_id),
                tuple(int(r) for r in p.replica_nodes),
                tuple(int(r) for r in p.isr_nodes),
            )
    return out
