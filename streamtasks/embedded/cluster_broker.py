"""One node of the embedded Apache Kafka cluster: :class:`ClusterBroker`, and the settings
every node shares (:func:`cluster_settings`).

A node is broker and controller in one KRaft process (an
:class:`~streamtasks.embedded.KafkaBroker`) on fixed ports: ``PLAINTEXT`` for clients (advertised
as its :class:`~streamtasks.embedded.fault_proxy.FaultProxy`'s address when it has one),
``INTERNAL`` for replication, ``CONTROLLER`` for the quorum. Its storage is formatted once, with
the cluster's id and initial controllers, and outlives the process: :meth:`ClusterBroker.kill`
(SIGKILL), :meth:`~ClusterBroker.stop` (SIGTERM, a controlled shutdown) and
:meth:`~ClusterBroker.start` (same ports, same data), :meth:`~ClusterBroker.pause` (SIGSTOP, a
hung broker) and :meth:`~ClusterBroker.resume`. :class:`~streamtasks.embedded.kafka_cluster.KafkaCluster`
makes and owns them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Self

from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from streamtasks.embedded.fault_proxy import FaultProxy
from streamtasks.embedded.kafka_broker import KafkaBroker
from streamtasks.errors import BrokerError
from streamtasks.runtime.admin import metadata_request
from streamtasks.runtime.blocking import BlockingConnection

__all__ = ["CLUSTER_JVM_OPTIONS", "ClusterBroker", "broker_ids", "cluster_settings", "metadata_call"]

#: JVM options of a cluster node: three share the machine, so a smaller heap than one broker's,
#: and the C1 compiler only: a node restarted by a fault drill serves in about half the time
#: (killed and restarted on two loaded cores, load 22-27: 6.8-12.7 s against 21-24 s with C2),
#: which is most of a drill's time; the test traffic needs no peak throughput.
CLUSTER_JVM_OPTIONS = (
    "-Xms64m",
    "-Xmx384m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)


def cluster_settings(brokers: int) -> dict[str, str]:
    """The broker settings every node of a ``brokers``-node cluster shares (over the single
    broker's test settings): replication factor ``min(3, brokers)`` for new topics and the
    internal ones, ``min.insync.replicas`` 2 (1 on a single node), three ``__consumer_offsets``
    partitions (so groups spread over the brokers), and a 4 s broker session at the controller
    (a killed or paused broker is fenced and loses its leaderships 4 s later, not 9 s)."""
    rf = str(min(3, brokers))
    isr = str(min(2, brokers))
    return {
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        "broker.heartbeat.interval.ms": "500",
        "broker.session.timeout.ms": "4000",
    }


class ClusterBroker(KafkaBroker):
    """One node of a :class:`KafkaCluster`: broker and controller, on fixed ports, its data in
    ``directory`` (formatted on the first start only, kept across :meth:`kill`,
    :meth:`stop` and :meth:`start`; the cluster removes it when it stops)."""

    stop_timeout_s = 60.0

    def __init__(
        self,
        *,
        node_id: int,
        host: str,
        ports: Mapping[str, int],
        quorum: str,
        initial_controllers: str,
        cluster_id: str,
        directory: Path,
        configs: Mapping[str, str],
        proxy: FaultProxy | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        super().__init__(
            host=host,
            port=ports["PLAINTEXT"],
            configs=configs,
            startup_timeout_s=startup_timeout_s,
            jvm_options=CLUSTER_JVM_OPTIONS,
        )
        self.kind = f"Apache Kafka cluster node {node_id}"
        self.node_id = node_id
        self.internal_port = ports["INTERNAL"]
        self.controller_port = ports["CONTROLLER"]
        self.directory = directory
        self.proxy = proxy
        self.paused = False
        self._quorum = quorum
        self._initial_controllers = initial_controllers
        self._cluster_id = cluster_id

    @property
    def address(self) -> str:
        """``host:port`` clients reach this broker at: its proxy's when it has one."""
        return self.proxy.address if self.proxy is not None else self.bootstrap_servers

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running" if self.running else "down"
        return f"ClusterBroker(node_id={self.node_id}, address={self.address!r}, pid={self.pid}, {state})"

    # -- the process -----------------------------------------------------------------

    def launch(self) -> None:
        """Start the process (formatting the storage on the first start) without waiting."""
        if self.running:
            return
        self._prepare()
        self._proc = self._spawn()
        atexit.register(self.stop)

    def start(self) -> Self:
        """Start on the same ports and data, and wait until the cluster serves this broker."""
        self.launch()
        self.wait_ready()
        return self

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until the broker answers ApiVersions and its own Metadata lists it (it is
        registered and unfenced at the controller); raise :class:`BrokerError` otherwise."""
        deadline = time.monotonic() + (self._timeout if timeout_s is None else timeout_s)
        self._wait_ready()
        while True:
            if not self.running:
                raise BrokerError(f"{self.kind} exited while starting; its log:\n{self._log_tail()}")
            with (
                contextlib.suppress(BrokerError),
                BlockingConnection(self.host, self.port, timeout_s=5.0) as conn,
            ):
                if self.node_id in broker_ids(metadata_call(conn, ())):
                    return
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"{self.kind} is not in the cluster's metadata; its log:\n{self._log_tail()}"
                )
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL (a crash, no controlled shutdown); returns once the process is reaped."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self.paused = False
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    def stop(self, timeout_s: float | None = None) -> None:
        """SIGTERM and wait for the clean (controlled) shutdown, SIGKILL after ``timeout_s``
        (default :attr:`stop_timeout_s`); a paused broker is resumed first. Keeps the data."""
        if self.paused:
            self.resume()
        super().stop(timeout_s)

    def pause(self) -> None:
        """SIGSTOP: the process hangs (sockets open, nothing answered) until :meth:`resume`."""
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        self._signal(signal.SIGCONT)
        self.paused = False

    def _signal(self, sig: signal.Signals) -> None:
        if self._proc is None or self._proc.poll() is not None:
            raise BrokerError(f"{self.kind} is not running")
        os.kill(self._proc.pid, sig)

    # -- files and storage -------------------------------------------------------------

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._dir = self.directory
        logging = self._write_logging(self.directory)
        props = self._write_properties(self.directory)
        if not (self.directory / "data" / "meta.properties").is_file():
            self._format(props, logging)
        return self._launch(props, logging)

    def format_storage(self) -> None:
        """Write the properties and format the storage now (done by the first start otherwise):
        :class:`KafkaCluster` formats its nodes side by side before starting them."""
        self._prepare()
        self.directory.mkdir(parents=True, exist_ok=True)
        logging = self._write_logging(self.directory)
        props = self._write_properties(self.directory)
        if not (self.directory / "data" / "meta.properties").is_file():
            self._format(props, logging)

    def _write_properties(self, directory: Path) -> Path:
        advertised = self.proxy.address if self.proxy is not None else self.bootstrap_servers
        names = ("PLAINTEXT", "INTERNAL", "CONTROLLER")
        ports = (self.port, self.internal_port, self.controller_port)
        self.configs = {
            **self.configs,
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": self._quorum,
            "listeners": ",".join(f"{n}://{self.host}:{p}" for n, p in zip(names, ports, strict=True)),
            "advertised.listeners": (
                f"PLAINTEXT://{advertised},INTERNAL://{self.host}:{self.internal_port},"
                f"CONTROLLER://{self.host}:{self.controller_port}"
            ),
            "listener.security.protocol.map": ",".join(f"{n}:PLAINTEXT" for n in names),
            "inter.broker.listener.name": "INTERNAL",
        }
        return super()._write_properties(directory)

    def _quorum_options(self) -> tuple[str, ...]:
        return ("-t", self._cluster_id, "--initial-controllers", self._initial_controllers)

    def _cleanup(self) -> None:
        """Nothing: the data directory outlives the process (the cluster removes it)."""


def metadata_call(conn: BlockingConnection, topics: Iterable[str] | None) -> MetadataResponse:
    """Metadata for ``topics`` (every topic, the internal ones too, when None) over ``conn``."""
    request = (
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        if topics is None
        else metadata_request(topics)
    )
    return conn.call(request, MetadataResponse)


def broker_ids(response: MetadataResponse) -> set[int]:
    """The node ids a Metadata response lists (registered, unfenced brokers)."""
    return {int(b.node_id) for b in response.brokers}
