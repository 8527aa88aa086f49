"""Workers for live group tests: streamtasks consumers and peers no one here wrote
(confluent-kafka, kafka-python, aiokafka, the Java ``KafkaConsumer``), all reporting their
rebalance callbacks to one :class:`~streamtasks.drills.OwnershipAudit` and their records to
one :class:`~streamtasks.drills.RecordAudit`.

Records are named by their value (the producer's id) unless a worker is given
``record_ids="offset"``: then by ``"<partition>:<offset>"`` (:func:`streamtasks.drills.ledger.offset_id`),
and the producer names what the broker acknowledged the same way, so the audit is per offset."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import subprocess
import threading
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from streamtasks.drills import OwnershipAudit, RecordAudit
from streamtasks.drills.ledger import offset_id
from streamtasks.embedded._process import die_with_parent, log_tail
from streamtasks.embedded.java import PEER_JVM_OPTIONS, JavaProgram, JavaUnavailable, peer_consumer
from streamtasks.embedded.kafka_broker import kafka_requirements_missing
from streamtasks.runtime.client_file import (
    java_properties,
    kafka_python_config,
    librdkafka_config,
    security_kwargs,
    write_properties,
)
from streamtasks.runtime.consumer import Consumer
from streamtasks.runtime.member_loop import monotonic_ms
from streamtasks.runtime.security import ClientSettings
from topology import TopicPartition

FAST_GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "rebalance_timeout_ms": 10000}


class Audit:
    """Ledger + record audit behind one lock (peers call in from their own threads)."""

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.lock = threading.Lock()
        self.ledger = OwnershipAudit(partitions, start_ms=monotonic_ms())
        self.records = RecordAudit()
        self.owned: dict[str, set[TopicPartition]] = {}
        #: (monotonic ms, member, what, partition numbers): every callback in order, for reports.
        self.history: list[tuple[int, str, str, tuple[int, ...]]] = []

    def assigned(self, member: str, tps: Iterable[TopicPartition]) -> None:
        with self.lock:
            tps = list(tps)
            self.ledger.assigned(member, tps, monotonic_ms())
            self.owned.setdefault(member, set()).update(tps)
            self._note(member, "assigned", tps)

    def revoked(self, member: str, tps: Iterable[TopicPartition]) -> None:
        with self.lock:
            tps = list(tps)
            self.ledger.revoked(member, tps, monotonic_ms())
            self.owned.setdefault(member, set()).difference_update(tps)
            self._note(member, "revoked", tps)

    def consumed(self, record_ids: Iterable[str]) -> None:
        with self.lock:
            for rid in record_ids:
                self.records.consumed(rid)

    def gone(self, member: str) -> None:
        with self.lock:
            self.ledger.member_gone(member, monotonic_ms())
            self.owned.pop(member, None)
            self._note(member, "gone", ())

    def _note(self, member: str, what: str, tps: Iterable[TopicPartition]) -> None:
        self.history.append((monotonic_ms(), member, what, tuple(sorted(tp.partition for tp in tps))))

    def timeline(self) -> str:
        """The callbacks seen so far, one a line, in ms since the first."""
        with self.lock:
            start = self.history[0][0] if self.history else 0
            return "".join(f"{t - start:>7} {m:<13} {what:<8} {list(p)}\n" for t, m, what, p in self.history)

    def snapshot(self) -> dict[str, set[TopicPartition]]:
        with self.lock:
            return {m: set(p) for m, p in self.owned.items() if p}


class StreamtasksWorker:
    """A streamtasks Consumer that records its callbacks and commits after every batch."""

    def __init__(
        self, name: str, audit: Audit, topic: str, *, record_ids: str = "value", **settings: Any
    ) -> None:
        self.name = name
        self.audit = audit
        self.topic = topic
        self.record_ids = record_ids
        self.settings = {
            **FAST_GROUP,
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            **settings,
        }
        self.consumer: Consumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def on_partitions_assigned(self, tps: tuple[TopicPartition, ...]) -> None:
        self.audit.assigned(self.name, tps)

    def on_partitions_revoked(self, tps: tuple[TopicPartition, ...]) -> None:
        self.audit.revoked(self.name, tps)

    def on_partitions_lost(self, tps: tuple[TopicPartition, ...]) -> None:
        self.audit.revoked(self.name, tps)

    async def start(self) -> None:
        self.consumer = Consumer([self.topic], listener=self, **self.settings)
        await self.consumer.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        assert self.consumer is not None
        while not self._stopping:
            batch = await self.consumer.getmany(timeout_ms=200)
            by_offset = self.record_ids == "offset"
            ids = [
                offset_id(r.partition, r.offset) if by_offset else r.value.decode()
                for records in batch.values()
                for r in records
            ]
            if ids:
                self.audit.consumed(ids)
                with contextlib.suppress(Exception):
                    await self.consumer.commit()

    async def stop(self) -> None:
        """End the poll loop at its next turn, then stop the consumer (commit, revoke, leave).

        The loop is not cancelled: a cancellation can be lost on the way (seen on Python 3.11
        with a task in ``getmany``/``commit``: it stayed "cancelling" and kept polling), and the
        test then hung here. Cancelling is only the fallback for a loop that does not end."""
        self._stopping = True
        if self._task is not None:
            while not (await asyncio.wait({self._task}, timeout=5))[0]:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.consumer is not None:
            await self.consumer.stop()


class ThreadWorker:
    """A blocking peer client (confluent-kafka or kafka-python) polled on its own thread."""

    def __init__(
        self, name: str, audit: Audit, make: Callable[[ThreadWorker], Any], poll: Callable[[Any], list[str]]
    ):
        self.name = name
        self.audit = audit
        self._make = make
        self._poll = poll
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            client = self._make(self)
            try:
                while not self._stop.is_set():
                    ids = self._poll(client)
                    if ids:
                        self.audit.consumed(ids)
            finally:
                client.close()  # commits (if configured), revokes, leaves the group
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


JAVA_PEER_INSTALL = (
    "install a JDK 17+ with javac (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless maven)"
)
_JAVA_PEER_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="{log}" append="true"><PatternLayout pattern="[%d] %p %m (%c)%n"/></File>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.kafka.clients.consumer.internals" level="INFO"/>
    <Root level="WARN"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


@dataclass(frozen=True, slots=True)
class JavaPeer:
    """A compiled ``PeerConsumer`` (:func:`streamtasks.embedded.java.compiled_program`)."""

    program: JavaProgram

    def command(self, log4j2: Path) -> list[str]:
        return self.program.command(*PEER_JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j2}")


def java_peer() -> JavaPeer:
    """Compile ``java/peer/src/PeerConsumer.java`` once per source, classpath and JDK (cached
    under ``$XDG_CACHE_HOME/streamtasks/java-peer/<hash>/``) and say how to run it.

    Raises :class:`JavaPeerMissing` saying what to install when java, javac or the Kafka jars
    are not there."""
    missing = kafka_requirements_missing(need_mvn=False)
    if missing is not None:
        raise JavaPeerMissing(f"{missing}: {JAVA_PEER_INSTALL}")
    try:
        return JavaPeer(peer_consumer())
    except JavaUnavailable as exc:
        raise JavaPeerMissing(str(exc)) from exc


class JavaPeerMissing(Exception):
    """This machine cannot run the Java peer (the message says what to install)."""


class JavaWorker:
    """The Java ``KafkaConsumer`` of ``java/peer`` as a child process, driven over stdin/stdout.

    Its JSON lines (rebalance callbacks, records) feed the :class:`Audit` from a reader thread.
    :meth:`start` must run on a thread that outlives the process (the asyncio loop's, as in the
    tests): the JVM gets SIGKILL when that thread's process dies. :meth:`stop` asks it to close
    (revoke, leave the group) and kills it if it does not within ``stop_timeout_s``; so does
    garbage collection or interpreter exit of a worker still running. ``group.instance.id``
    and any other consumer property go in ``properties``."""

    stop_timeout_s = 30.0

    def __init__(
        self,
        name: str,
        audit: Audit,
        peer: JavaPeer,
        *,
        bootstrap: str,
        group: str,
        topic: str,
        log_dir: Path,
        properties: Mapping[str, str] | None = None,
        record_ids: str = "value",
        settings: ClientSettings | None = None,
    ) -> None:
        self.name = name
        self.audit = audit
        self.peer = peer
        self.topic = topic
        self.record_ids = record_ids
        self.properties = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            **(properties or {}),
        }
        self.log_path = log_dir / f"{name}.log"
        #: The cluster's security (secrets included) in a 0600 file the peer reads (``@file``).
        self.secure_file: Path | None = None
        if settings is not None and settings.security_protocol != "PLAINTEXT":
            self.secure_file = log_dir / f"{name}.{uuid.uuid4().hex[:6]}.client.properties"
            write_properties(java_properties(settings), self.secure_file)
        self.events: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._closed = threading.Event()

    def start(self) -> None:
        self._closed.clear()
        log4j2 = self.log_path.with_suffix(".log4j2.xml")
        log4j2.write_text(_JAVA_PEER_LOG4J2.format(log=self.log_path))
        args = [self.topic, *(f"{k}={v}" for k, v in self.properties.items())]
        if self.secure_file is not None:
            args.append(f"@{self.secure_file}")
        with self.log_path.open("ab") as log:  # the JVM's own stderr goes beside the client's log
            proc = subprocess.Popen(
                [*self.peer.command(log4j2), *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only sets the parent-death signal
            )
        self._proc = proc
        weakref.finalize(self, _kill, proc)
        self._reader = threading.Thread(
            target=self._read, args=(proc,), name=f"{self.name}-stdout", daemon=True
        )
        self._reader.start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        with proc.stdout:
            for raw in proc.stdout:
                self._handle(raw)

    def _handle(self, raw: bytes) -> None:
        try:
            event = json.loads(raw)
            kind = event["event"]
        except (ValueError, KeyError, TypeError):
            self.error = self.error or RuntimeError(f"{self.name} wrote a line that is no event: {raw!r}")
            return
        self.events.append({**event, "at_ms": monotonic_ms()})
        if kind == "assigned":
            self.audit.assigned(self.name, _tps(event["partitions"]))
        elif kind in ("revoked", "lost"):
            self.audit.revoked(self.name, _tps(event["partitions"]))
        elif kind == "records" and self.record_ids == "offset":
            self.audit.consumed(offset_id(int(p), int(o)) for p, o in event["offsets"])
        elif kind == "records":
            self.audit.consumed(event["ids"])
        elif kind == "closed":
            self._closed.set()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        with contextlib.suppress(OSError):  # already gone: the checks below say so
            proc.stdin.write(b'{"cmd":"stop"}\n')
            proc.stdin.close()
        try:
            code = proc.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            code = None
        if self._reader is not None:
            self._reader.join(timeout=10)
        if code != 0 or not self._closed.is_set():
            said = "did not close" if code is None else f"exited with {code}"
            self.error = self.error or RuntimeError(
                f"{self.name} {said}; its log:\n{log_tail(self.log_path)}"
            )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()


def _tps(pairs: Iterable[list[Any]]) -> list[TopicPartition]:
    return [TopicPartition(topic, int(partition)) for topic, partition in pairs]


def confluent_worker(
    name: str,
    audit: Audit,
    bootstrap: str,
    group: str,
    topic: str,
    *,
    group_instance_id: str | None = None,
    group_protocol: str = "classic",
    record_ids: str = "value",
    settings: ClientSettings | None = None,
) -> ThreadWorker:
    """librdkafka: ``cooperative-sticky`` on the classic protocol, or KIP-848 with
    ``group_protocol="consumer"`` (the broker's assignor; librdkafka refuses the classic-only
    settings there); ``settings``: the cluster's TLS/SASL (and bootstrap servers)."""
    security = librdkafka_config(settings) if settings is not None else {"bootstrap.servers": bootstrap}
    from confluent_kafka import Consumer as CKConsumer

    def make(worker: ThreadWorker) -> Any:
        static = {"group.instance.id": group_instance_id} if group_instance_id else {}
        protocol: dict[str, Any] = (
            {"group.protocol": "consumer"}
            if group_protocol == "consumer"
            else {
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
            }
        )
        c = CKConsumer(
            {
                **security,
                "group.id": group,
                **protocol,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                **static,
            }
        )

        def on_assign(_c: Any, parts: list[Any]) -> None:
            audit.assigned(name, [TopicPartition(p.topic, p.partition) for p in parts])

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            audit.revoked(name, [TopicPartition(p.topic, p.partition) for p in parts])

        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        return c

    def poll(c: Any) -> list[str]:
        msg = c.poll(0.1)
        if msg is None or msg.error():
            return []
        return [offset_id(msg.partition(), msg.offset()) if record_ids == "offset" else msg.value().decode()]

    return ThreadWorker(name, audit, make, poll)


def kafka_python_worker(
    name: str,
    audit: Audit,
    bootstrap: str,
    group: str,
    topic: str,
    *,
    group_instance_id: str | None = None,
    record_ids: str = "value",
    settings: ClientSettings | None = None,
) -> ThreadWorker:
    security = kafka_python_config(settings) if settings is not None else {"bootstrap_servers": bootstrap}
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            audit.revoked(name, [TopicPartition(p.topic, p.partition) for p in revoked])

        def on_partitions_assigned(self, assigned: Any) -> None:
            audit.assigned(name, [TopicPartition(p.topic, p.partition) for p in assigned])

        def on_partitions_lost(self, lost: Any) -> None:
            audit.revoked(name, [TopicPartition(p.topic, p.partition) for p in lost])

    def make(worker: ThreadWorker) -> Any:
        c = KafkaConsumer(
            **security,
            group_id=group,
            partition_assignment_strategy=[CooperativeStickyAssignor],
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=200,
            group_instance_id=group_instance_id,
            # kafka-python may join before its first metadata answer names the topic; as leader it
            # then assigns nothing and only rejoins when its metadata next changes (default: after
            # 5 minutes). Seen once in a clean-clone CI under load (docs/testing.md).
            metadata_max_age_ms=5000,
        )
        # ...and a shorter age did not always save it (a second clean-clone run timed out the
        # same way): it subscribes only once its own metadata names the topic's partitions.
        deadline = time.monotonic() + 30
        while not c.partitions_for_topic(topic):
            if time.monotonic() > deadline:
                c.close()
                raise AssertionError(f"kafka-python never saw the partitions of {topic}")
            time.sleep(0.1)
        c.subscribe([topic], listener=Listener())
        return c

    def poll(c: Any) -> list[str]:
        batch = c.poll(timeout_ms=100)
        if record_ids == "offset":
            return [offset_id(r.partition, r.offset) for records in batch.values() for r in records]
        return [r.value.decode() for records in batch.values() for r in records]

    return ThreadWorker(name, audit, make, poll)


class SteadyProducer:
    """Produces ``rate`` records per second with unique ids until stopped."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        audit: Audit,
        partitions: int,
        rate: int = 50,
        *,
        record_ids: str = "value",
        settings: ClientSettings | None = None,
    ) -> None:
        self.bootstrap, self.topic, self.audit, self.partitions, self.rate = (
            bootstrap,
            topic,
            audit,
            partitions,
            rate,
        )
        #: "offset": a record counts as produced once the broker acknowledged its offset.
        self.record_ids = record_ids
        self.settings = settings or ClientSettings.of(bootstrap)
        self._task: asyncio.Task[None] | None = None
        self._ids = itertools.count()

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(**self.settings.aiokafka_kwargs(), linger_ms=5)
        await self._producer.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            for _ in range(max(1, self.rate // 10)):
                n = next(self._ids)
                rid = f"{self.topic}:{n}"
                sent = await self._producer.send(self.topic, rid.encode(), partition=n % self.partitions)
                if self.record_ids == "offset":
                    sent.add_done_callback(self._acknowledged)
                    continue
                with self.audit.lock:
                    self.audit.records.produced(rid)
            await asyncio.sleep(0.1)

    def _acknowledged(self, sent: asyncio.Future[Any]) -> None:
        if not sent.cancelled() and sent.exception() is None:
            meta = sent.result()
            with self.audit.lock:
                self.audit.records.produced(offset_id(meta.partition, meta.offset))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._producer.flush()
        await self._producer.stop()


async def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.1)


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveGroup:
    """One live test's group: a fresh topic of ``count`` partitions, its group id, the audit,
    and makers for every kind of member, each filled in with those (and the record ids)."""

    audit: Audit
    bootstrap: str
    group: str
    topic: str
    count: int
    record_ids: str = "value"
    log_dir: Path | None = None
    java_peer: JavaPeer | None = None
    #: The cluster's TLS/SASL settings, for every member and the producer (None: PLAINTEXT).
    settings: ClientSettings | None = None

    @classmethod
    def create(
        cls, cluster: Any, topic: str, count: int, *, record_ids: str = "value", log_dir: Path | None = None,
        java_peer: JavaPeer | None = None, settings: ClientSettings | None = None,
    ) -> LiveGroup:  # fmt: skip
        """Create ``topic`` on ``cluster`` (group ``g-<topic>``) and an empty audit for it;
        ``settings``: the members reach the cluster with these (its topics are still created
        through ``cluster``)."""
        cluster.create_topics({topic: count})
        return cls(
            audit=Audit({TopicPartition(topic, p) for p in range(count)}),
            bootstrap=settings.bootstrap_servers if settings is not None else cluster.bootstrap_servers,
            settings=settings,
            group=f"g-{topic}",
            topic=topic,
            count=count,
            record_ids=record_ids,
            log_dir=log_dir,
            java_peer=java_peer,
        )

    @property
    def partitions(self) -> set[TopicPartition]:
        return {TopicPartition(self.topic, p) for p in range(self.count)}

    def producer(self) -> SteadyProducer:
        return SteadyProducer(
            self.bootstrap,
            self.topic,
            self.audit,
            self.count,
            record_ids=self.record_ids,
            settings=self.settings,
        )

    def streamtasks(self, name: str, **settings: Any) -> StreamtasksWorker:
        return StreamtasksWorker(
            name, self.audit, self.topic, record_ids=self.record_ids, bootstrap_servers=self.bootstrap,
            group_id=self.group, **(security_kwargs(self.settings) if self.settings else {}), **settings,
        )  # fmt: skip

    def java(self, name: str, properties: Mapping[str, str]) -> JavaWorker:
        assert self.java_peer is not None, "a Java member needs the compiled peer"
        assert self.log_dir is not None, "a Java member needs a log directory"
        return JavaWorker(
            name, self.audit, self.java_peer, bootstrap=self.bootstrap, group=self.group, topic=self.topic,
            log_dir=self.log_dir, properties=properties, record_ids=self.record_ids, settings=self.settings,
        )  # fmt: skip

    def confluent(self, name: str, **options: Any) -> ThreadWorker:
        return confluent_worker(
            name, self.audit, self.bootstrap, self.group, self.topic, record_ids=self.record_ids,
            settings=self.settings, **options,
        )  # fmt: skip

    def kafka_python(self, name: str, **options: Any) -> ThreadWorker:
        return kafka_python_worker(
            name, self.audit, self.bootstrap, self.group, self.topic, record_ids=self.record_ids,
            settings=self.settings, **options,
        )  # fmt: skip


def stable(audit: Audit, partitions: set[TopicPartition], members: set[str]) -> Callable[[], bool]:
    """Every partition owned exactly once, each by one of ``members``, each member owning some."""

    def check() -> bool:
        snap = audit.snapshot()
        owned = [tp for m in members for tp in snap.get(m, set())]
        return (
            sorted(owned) == sorted(partitions) and set(snap) <= members and all(snap.get(m) for m in members)
        )

    return check


async def start_worker(worker: Any) -> None:
    """Start any worker: a thread or JVM peer on the calling thread (the loop's: the JVM dies
    with the thread that started it), a streamtasks worker on the loop."""
    if isinstance(worker, ThreadWorker | JavaWorker):
        worker.start()
    else:
        await worker.start()


async def stop_worker(worker: Any) -> None:
    """Stop any worker (commit, revoke, leave); a peer that failed raises here."""
    if isinstance(worker, ThreadWorker | JavaWorker):
        await asyncio.to_thread(worker.stop)
        assert worker.error is None, worker.error
    else:
        await worker.stop()


async def rolling_bounce_group(
    make: Callable[[str], Any],
    order: Iterable[str],
    audit: Audit,
    partitions: set[TopicPartition],
    producer: SteadyProducer,
    *,
    static: bool,
    log_dir: Path,
    wait_s: float,
    joined: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Start the members of ``order`` one by one, then bounce each in turn while ``producer``
    writes; stop the producer and wait until every record it produced was consumed.

    Dynamic members: the group settles without the stopped member before it comes back.
    Static ones: the replacement starts at once, under the same instance id. ``joined`` runs
    once every member is in (e.g. to describe the group). The callbacks' timeline goes to
    ``log_dir/timeline.txt``."""
    names = tuple(order)
    await producer.start()
    producing = True
    workers: dict[str, Any] = {}
    try:
        for name in names:
            workers[name] = make(name)
            await start_worker(workers[name])
            await wait_until(stable(audit, partitions, set(workers)), wait_s, f"{name} to get partitions")
        if joined is not None:
            await joined()
        for name in names:
            await stop_worker(workers.pop(name))
            audit.gone(name)
            if not static:  # a static member's partitions wait for its replacement
                await wait_until(stable(audit, partitions, set(workers)), wait_s, f"the group without {name}")
            workers[name] = make(name)
            await start_worker(workers[name])
            await wait_until(stable(audit, partitions, set(workers)), wait_s, f"{name} back")
        await producer.stop()
        producing = False
        await wait_until(lambda: not audit.records.lost(), wait_s, "every record consumed")
        for name in list(workers):
            await stop_worker(workers.pop(name))
    finally:
        for w in workers.values():
            with contextlib.suppress(Exception):
                await stop_worker(w)
        if producing:
            await producer.stop()
        (log_dir / "timeline.txt").write_text(audit.timeline())
