"""Apache Kafka 4.x as a child process: the reference broker for tests, the demo and drills.

The jars come from Maven Central through the small Maven project ``broker/pom.xml`` next to this
module (package data, so an installed wheel has it too): the first start runs
``mvn dependency:build-classpath`` and caches the classpath in
``$XDG_CACHE_HOME/streamtasks/kafka-<version>/`` (``~/.cache`` without XDG_CACHE_HOME; the jars
themselves stay in Maven's local repository, ``~/.m2``); later starts read the cached file and
run no Maven at all, until the pom changes (the cache is keyed on its hash)::

    with KafkaBroker() as broker:
        broker.create_topics({"orders": 12})
        run_app(bootstrap_servers=broker.bootstrap_servers)

Each start formats a fresh temporary directory (``kafka.tools.StorageTool format --standalone``)
and runs ``kafka.Kafka`` as one combined broker+controller KRaft node on free loopback ports,
with settings for fast tests (no initial rebalance delay, one offsets-topic partition,
replication factor 1, low minimum session and heartbeat timeouts for both group protocols).
The process dies with its parent (Linux parent-death signal); :meth:`KafkaBroker.stop` kills it
(its data is about to be removed: no controlled shutdown to wait for) and removes the directory.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

from streamtasks.embedded._process import ChildBroker, die_with_parent, unused_port
from streamtasks.errors import BrokerError

__all__ = [
    "JAVA_MIN_VERSION",
    "KafkaBroker",
    "broker_pom",
    "java_version",
    "kafka_classpath",
    "kafka_requirements_missing",
    "kafka_version",
    "random_uuid",
]

#: Kafka 4.x brokers need Java 17 or newer.
JAVA_MIN_VERSION = 17
#: What to tell someone whose machine cannot run the Kafka broker.
INSTALL_HINT = "install Java 17+ and Maven (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless maven)"

#: Broker settings for fast tests on one node. Every key can be overridden by ``configs``.
TEST_SETTINGS: dict[str, str] = {
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # Classic protocol: no wait for more members before the first rebalance; short sessions allowed.
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    # KIP-848 consumer protocol: the session and heartbeat interval are the broker's to set.
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "500",
    # 4.4 batches target-assignment computations (default 1 s apart); compute at once instead.
    "group.consumer.assignment.interval.ms": "0",
    # Kafka Streams' KIP-1071 groups, for the same reasons.
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.min.session.timeout.ms": "1000",
    "group.streams.session.timeout.ms": "10000",
    "group.streams.min.heartbeat.interval.ms": "100",
    "group.streams.heartbeat.interval.ms": "500",
    "group.streams.assignment.interval.ms": "0",
}

#: JVM options of the broker: a small heap and a collector that starts fast.
BROKER_JVM_OPTIONS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
#: JVM options of the one-shot storage formatter (short-lived: no optimising compiler).
FORMAT_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")

_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN" shutdownHook="disable">
  <Appenders>
    <File name="file" fileName="{log}" append="true">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
{loggers}
    <Root level="WARN"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


def broker_pom() -> Path:
    """``streamtasks/embedded/broker/pom.xml``: package data, there in a wheel as in a checkout."""
    pom = Path(__file__).resolve().with_name("broker") / "pom.xml"
    if not pom.is_file():
        raise BrokerError(
            f"the Apache Kafka broker's Maven project is missing ({pom}): this streamtasks "
            "installation lacks its package data; reinstall it, or use STREAMTASKS_BROKER=tansu "
            "or STREAMTASKS_BOOTSTRAP=host:port"
        )
    return pom


def kafka_version(pom: Path | None = None) -> str:
    """The Kafka version the pom names (its ``kafka.version`` property)."""
    root = ET.parse(pom or broker_pom()).getroot()
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    node = root.find("m:properties/m:kafka.version", ns)
    if node is None or not (node.text or "").strip():
        raise BrokerError(f"{pom or broker_pom()} has no <kafka.version> property")
    return (node.text or "").strip()


@functools.cache
def java_version(java: str) -> int | None:
    """The major version of the ``java`` executable (8 for 1.8), or None if it does not say."""
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def kafka_requirements_missing(*, need_mvn: bool = True) -> str | None:
    """Why the Kafka broker cannot start here (``"no java on PATH"``, ...), or None if it can."""
    java = shutil.which("java")
    if java is None:
        return "no java on PATH"
    major = java_version(java)
    if major is None or major < JAVA_MIN_VERSION:
        return f"java on PATH is version {major or 'unknown'}, Kafka 4 needs {JAVA_MIN_VERSION}+"
    if need_mvn and shutil.which("mvn") is None:
        return "no mvn on PATH"
    return None


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "streamtasks"


def kafka_classpath(pom: Path | None = None) -> list[str]:
    """The broker's jars: read from the cache, or resolved with Maven on the first call.

    The cache file is keyed on the pom's hash, and a classpath whose jars are gone (a cleaned
    ``~/.m2``) is resolved again. Concurrent first starts wait on a lock file."""
    pom = pom or broker_pom()
    version = kafka_version(pom)
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    cache = _cache_root() / f"kafka-{version}"
    cache.mkdir(parents=True, exist_ok=True)
    cached = cache / f"classpath-{digest}.txt"
    with (cache / "resolve.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        jars = _read_classpath(cached)
        if jars is None:
            _resolve(pom, version, cached)
            jars = _read_classpath(cached)
            if jars is None:
                raise BrokerError(f"Maven resolved a classpath with missing jars ({cached})")
    return jars


def _read_classpath(path: Path) -> list[str] | None:
    if not path.is_file():
        return None
    jars = [j for j in path.read_text().strip().split(os.pathsep) if j]
    if not jars or not all(os.path.isfile(j) for j in jars):
        return None
    return jars


def _resolve(pom: Path, version: str, out: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(
            f"the Apache Kafka {version} jars are not resolved yet and there is no mvn on PATH: "
            f"{INSTALL_HINT}, or use STREAMTASKS_BROKER=tansu"
        )
    note = f"streamtasks: resolving Apache Kafka {version} jars with Maven (first start only)"
    print(note, file=sys.stderr, flush=True)
    partial = out.with_suffix(".partial")
    command = [
        *(mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(pom), "dependency:build-classpath"),
        *(f"-Dmdep.outputFile={partial}", "-Dmdep.includeScope=runtime"),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BrokerError(f"Maven did not resolve the Kafka jars within 15 minutes: {command}") from exc
    if done.returncode != 0 or not partial.is_file():
        output = (done.stdout + done.stderr)[-3000:]
        raise BrokerError(f"Maven could not resolve the Kafka jars ({' '.join(command)}):\n{output}")
    partial.replace(out)


def random_uuid() -> str:
    """A random KRaft cluster id, as ``kafka-storage.sh random-uuid`` prints one."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def server_properties(
    *,
    host: str,
    port: int,
    controller_port: int,
    data_dir: Path,
    configs: Mapping[str, str],
    more_listeners: Mapping[str, int] | None = None,
) -> str:
    """``server.properties`` of one combined broker+controller node; ``more_listeners`` adds
    listeners beside PLAINTEXT, each named after its security protocol (``{"SSL": 9093}``)."""
    ports = {"PLAINTEXT": port, **(more_listeners or {}), "CONTROLLER": controller_port}
    listeners = ",".join(f"{name}://{host}:{p}" for name, p in ports.items())
    protocols = ",".join(f"{name}:{'PLAINTEXT' if name == 'CONTROLLER' else name}" for name in ports)
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"{host}:{controller_port}",
        "listeners": listeners,
        "advertised.listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": protocols,
        "log.dirs": str(data_dir),
        **TEST_SETTINGS,
        **configs,
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


class KafkaBroker(ChildBroker):
    """An Apache Kafka broker+controller child process on ``host:port`` (a free port unless given).

    ``configs`` adds or overrides broker settings (see :data:`TEST_SETTINGS`); ``log_path``
    keeps the broker's log (log4j at WARN, plus its stdout and stderr) in a file of your choice
    instead of the temporary directory."""

    kind = "Apache Kafka broker"
    #: Its data directory is removed right after, so a controlled shutdown is not worth waiting
    #: for: SIGKILL at once (with thousands of partitions the SIGTERM path took 46 s, the
    #: SIGKILL 0.1 s; a test session's last teardown spent 34 s there).
    stop_timeout_s = 0.0
    #: Loggers above the root's WARN (the line saying the broker started).
    log_levels: Mapping[str, str] = {"kafka.server.KafkaRaftServer": "INFO"}

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        configs: Mapping[str, str] | None = None,
        startup_timeout_s: float = 90.0,
        log_path: str | os.PathLike[str] | None = None,
        jvm_options: tuple[str, ...] = BROKER_JVM_OPTIONS,
    ) -> None:
        super().__init__(host=host, port=port, startup_timeout_s=startup_timeout_s)
        self.configs = dict(configs or {})
        self.controller_port = 0
        self.version = ""
        self._given_log = Path(log_path) if log_path else None
        self._jvm_options = jvm_options
        self._java = ""
        self._classpath = ""
        self._dir: Path | None = None
        #: Listeners beside PLAINTEXT (security protocol → port), set by a subclass's _spawn.
        self._more_listeners: dict[str, int] = {}

    def _prepare(self) -> None:
        missing = kafka_requirements_missing(need_mvn=False)
        if missing is not None:
            hint = f"{INSTALL_HINT}, or use STREAMTASKS_BROKER=tansu"
            raise BrokerError(f"cannot start Apache Kafka ({missing}): {hint}")
        self._java = shutil.which("java") or "java"
        pom = broker_pom()
        self.version = kafka_version(pom)
        self._classpath = os.pathsep.join(kafka_classpath(pom))

    def _spawn(self) -> subprocess.Popen[bytes]:
        self._dir = Path(tempfile.mkdtemp(prefix="streamtasks-kafka-"))
        logging = self._write_logging(self._dir)
        self.controller_port = unused_port(self.host, {self.port, *self._more_listeners.values()})
        props = self._write_properties(self._dir)
        self._format(props, logging)
        return self._launch(props, logging)

    def _write_logging(self, directory: Path) -> str:
        """Write ``log4j2.xml`` into ``directory`` (the log itself goes to :attr:`log_path`,
        appended to) and return the JVM option naming it."""
        self.log_path = self._given_log or directory / "server.log"
        self.log_path.touch()
        log4j = directory / "log4j2.xml"
        loggers = "\n".join(f'    <Logger name="{n}" level="{v}"/>' for n, v in self.log_levels.items())
        log4j.write_text(_LOG4J2_XML.format(log=self.log_path, loggers=loggers))
        return f"-Dlog4j2.configurationFile={log4j}"

    def _write_properties(self, directory: Path) -> Path:
        """Write ``server.properties`` (data in ``directory/data``) and return its path."""
        props = directory / "server.properties"
        settings = server_properties(
            host=self.host,
            port=self.port,
            controller_port=self.controller_port,
            data_dir=directory / "data",
            configs=self.configs,
            more_listeners=self._more_listeners,
        )
        props.write_text(settings)
        return props

    def _launch(self, props: Path, logging: str) -> subprocess.Popen[bytes]:
        """Run ``kafka.Kafka`` on the formatted storage, its output appended to :attr:`log_path`."""
        assert self.log_path is not None
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                [self._java, *self._jvm_options, logging, "-cp", self._classpath, "kafka.Kafka", str(props)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=props.parent,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only sets the parent-death signal
            )

    def _format(self, props: Path, logging: str) -> None:
        command = [
            *(self._java, *FORMAT_JVM_OPTIONS, logging, "-cp", self._classpath, "kafka.tools.StorageTool"),
            *("format", *self._quorum_options(), "-c", str(props)),
            *self._format_options(),
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=self._timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(f"formatting the Kafka storage took over {self._timeout}s") from exc
        if done.returncode != 0:
            raise BrokerError(f"formatting the Kafka storage failed:\n{(done.stdout + done.stderr)[-3000:]}")

    def _quorum_options(self) -> tuple[str, ...]:
        """The cluster id and controller quorum ``StorageTool format`` writes: a fresh id and a
        standalone quorum of this one node (a cluster's nodes share both, see
        :mod:`streamtasks.embedded.kafka_cluster`)."""
        return ("--standalone", "-t", random_uuid())

    def _format_options(self) -> tuple[str, ...]:
        """More arguments of ``StorageTool format`` (none here; the secured broker adds its SCRAM
        users, see :mod:`streamtasks.embedded.secure_broker`)."""
        return ()

    def _cleanup(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None
        self.log_path = None
