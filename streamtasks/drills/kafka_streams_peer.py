"""Kafka Streams' own Java workers in a streams group: ``java/streams``' ``WordCount`` (a
Kafka Streams 4.4.0 word count with ``group.protocol=streams``) as child JVMs.

The program is compiled at first use against the kafka-streams 4.4.0 jars that
``java/oracle/pom.xml`` resolves (the oracles' pom: kafka-streams and kafka-clients at the
broker's version, kept off the broker's classpath), cached like the other Java programs
(:mod:`streamtasks.embedded.java`)::

    names = WordCountNames(application_id="wc", input_topic="words", output_topic="counts")
    peer = KafkaStreamsPeer.start(names, bootstrap="127.0.0.1:9092", state_dir=tmp / "p1")
    peer.wait_for(lambda p: p.running and p.active)   # its tasks, from its own metadata
    peer.stop()                                       # SIGTERM: close, leave the group
    peer.kill()                                       # SIGKILL

Each JVM prints its state transitions and its tasks (``TASKS active=[0_0, 1_1] standby=[]``);
:attr:`KafkaStreamsPeer.lines` keeps them, :attr:`KafkaStreamsPeer.active` is the last task set and
:attr:`KafkaStreamsPeer.restored` the changelog partitions it restored (and how many records).
:class:`WordCountNames` holds the names Kafka Streams derives for the topology, which a
streamtasks App must use to share the group (docs/streams-groups.md).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from streamtasks.embedded._process import die_with_parent
from streamtasks.embedded.java import JavaProgram, JavaUnavailable, compiled_program
from streamtasks.embedded.kafka_broker import kafka_classpath
from streamtasks.errors import BrokerError, StreamTasksError
from streamtasks.protocol.streams_group import KeyValue, Subtopology, TopicInfo, Topology

__all__ = [
    "KAFKA_STREAMS_POM",
    "WORD_COUNT_SOURCE",
    "KafkaStreamsPeer",
    "KafkaStreamsPeerError",
    "WordCountNames",
    "word_count_program",
    "word_count_topology",
]

_JAVA = Path(__file__).resolve().parents[2] / "java"
#: The pom that resolves kafka-streams (and kafka-clients) at the broker's version.
KAFKA_STREAMS_POM = _JAVA / "oracle" / "pom.xml"
WORD_COUNT_SOURCE = _JAVA / "streams" / "src" / "WordCount.java"
_JVM_OPTIONS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
_TASKS = re.compile(r"^TASKS active=\[(.*)\] standby=\[(.*)\]$")
_RESTORED = re.compile(r"^RESTORED (\S+)-(\d+) (\d+)$")


class KafkaStreamsPeerError(StreamTasksError):
    """A Kafka Streams worker failed: it exited, or did not reach a state in time."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WordCountNames:
    """The word count's names as Kafka Streams derives them from ``application_id``."""

    application_id: str
    input_topic: str
    output_topic: str

    #: The store (``Materialized.as``) and the repartition's name (``Grouped.with``).
    store: str = "word-counts"
    grouping: str = "words-by-word"

    @property
    def changelog_topic(self) -> str:
        return f"{self.application_id}-{self.store}-changelog"

    @property
    def repartition_topic(self) -> str:
        return f"{self.application_id}-{self.grouping}-repartition"


#: The internal topics' configs as Kafka Streams 4.4.0 declares them, in its order: the broker
#: compares a joining member's topology with the group's field by field, lists in order.
CHANGELOG_CONFIGS = (
    KeyValue(key="cleanup.policy", value="compact"),
    KeyValue(key="message.timestamp.type", value="CreateTime"),
)
REPARTITION_CONFIGS = (
    KeyValue(key="cleanup.policy", value="delete"),
    KeyValue(key="message.timestamp.type", value="CreateTime"),
    KeyValue(key="retention.ms", value="-1"),
    KeyValue(key="segment.bytes", value="52428800"),
)


def word_count_topology(names: WordCountNames, *, partitions: int = 0) -> Topology:
    """The topology ``WordCount`` declares in its StreamsGroupHeartbeat (epoch 0): what a
    streamtasks member must send, equal field by field, to share its streams group."""
    repartition = TopicInfo(
        name=names.repartition_topic,
        partitions=partitions,
        replication_factor=-1,
        topic_configs=REPARTITION_CONFIGS,
    )
    changelog = TopicInfo(
        name=names.changelog_topic,
        partitions=partitions,
        replication_factor=-1,
        topic_configs=CHANGELOG_CONFIGS,
    )
    return Topology(
        epoch=0,
        subtopologies=(
            Subtopology(
                subtopology_id="0",
                source_topics=(names.input_topic,),
                repartition_sink_topics=(names.repartition_topic,),
            ),
            Subtopology(
                subtopology_id="1",
                state_changelog_topics=(changelog,),
                repartition_source_topics=(repartition,),
            ),
        ),
    )


def word_count_program() -> JavaProgram:
    """``WordCount`` compiled against kafka-streams; :class:`JavaUnavailable` says what is missing."""
    try:
        classpath = kafka_classpath(KAFKA_STREAMS_POM)
    except BrokerError as exc:
        raise JavaUnavailable(f"the kafka-streams jars are not available: {exc}") from exc
    return compiled_program(WORD_COUNT_SOURCE, classpath, cache="java-wordcount")


def _task_set(text: str) -> frozenset[str]:
    return frozenset(t.strip() for t in text.split(",") if t.strip())


class KafkaStreamsPeer:
    """One ``WordCount`` JVM and what it printed (read by a thread as it comes)."""

    def __init__(self, process: subprocess.Popen[str], name: str) -> None:
        self.process = process
        self.name = name
        self.lines: list[str] = []
        self.active: frozenset[str] = frozenset()
        self.standby: frozenset[str] = frozenset()
        self.state = "CREATED"
        #: (changelog topic, partition, records restored), one per restore this JVM finished.
        self.restored: list[tuple[str, int, int]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name=f"kafka-streams-{name}", daemon=True)
        self._reader.start()

    @classmethod
    def start(
        cls,
        names: WordCountNames,
        *,
        bootstrap: str,
        state_dir: Path,
        name: str | None = None,
        guarantee: str | None = None,
    ) -> KafkaStreamsPeer:
        """Start one JVM; ``guarantee``: its ``processing.guarantee`` (default exactly_once_v2)."""
        program = word_count_program()
        state_dir.mkdir(parents=True, exist_ok=True)
        command = [
            *program.command(*_JVM_OPTIONS),
            *(bootstrap, names.application_id, names.input_topic, names.output_topic, str(state_dir)),
            *((guarantee,) if guarantee else ()),
        ]
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            preexec_fn=die_with_parent if os.name == "posix" else None,  # noqa: PLW1509
        )
        return cls(process, name or state_dir.name)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.rstrip("\n")
            with self._lock:
                self.lines.append(line)
                if line.startswith("STATE "):
                    self.state = line.removeprefix("STATE ")
                elif (match := _TASKS.match(line)) is not None:
                    self.active, self.standby = _task_set(match.group(1)), _task_set(match.group(2))
                elif (match := _RESTORED.match(line)) is not None:
                    self.restored.append((match.group(1), int(match.group(2)), int(match.group(3))))

    @property
    def running(self) -> bool:
        return self.state == "RUNNING" and self.process.poll() is None

    def errors(self) -> list[str]:
        with self._lock:
            return [line for line in self.lines if line.startswith("ERROR ")]

    def wait_for(self, done: Callable[[KafkaStreamsPeer], bool], *, timeout_s: float = 90.0) -> None:
        """Wait until ``done(self)``; :class:`KafkaStreamsPeerError` if the JVM exits first or
        the time runs out (the message carries its last lines)."""
        deadline = time.monotonic() + timeout_s
        while not done(self):
            if self.process.poll() is not None:
                raise KafkaStreamsPeerError(f"{self.name} exited ({self.process.returncode}): {self.tail()}")
            if time.monotonic() > deadline:
                raise KafkaStreamsPeerError(f"{self.name}: not there after {timeout_s:.0f} s: {self.tail()}")
            time.sleep(0.2)

    def tail(self, n: int = 15) -> str:
        with self._lock:
            return "\n".join(self.lines[-n:])

    def stop(self, *, timeout_s: float = 60.0) -> bool:
        """SIGTERM: Kafka Streams closes (its member leaves the group) and the shutdown hook
        prints ``CLOSED``; whether it did (a JVM ended by SIGTERM exits 143 either way)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._finish()
        with self._lock:
            return "CLOSED" in self.lines

    def kill(self) -> int:
        """SIGKILL: no close, no leave (the broker fences the member after its session)."""
        self.process.kill()
        code = self.process.wait()
        self._finish()
        return code

    def _finish(self) -> None:
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()
