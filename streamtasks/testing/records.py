"""The test driver's topic handles: pipe typed records in, read typed records out (Kafka
Streams' ``TestInputTopic`` / ``TestOutputTopic`` / ``TestRecord``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from streamtasks.app.handlers import Headers
from streamtasks.state.serdes import Serde
from streamtasks.testing.topics import InMemoryTopics, StoredRecord


class Piper(Protocol):
    """What an input topic needs of the driver: :meth:`TopologyTestDriver.pipe_raw`."""

    def pipe_raw(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        timestamp: int | None = None,
        headers: tuple[tuple[str, bytes], ...] = (),
        partition: int | None = None,
    ) -> StoredRecord: ...


__all__ = ["Piper", "TestInputTopic", "TestOutputTopic", "TestRecord"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TestRecord:
    """A record read from an output topic, its key and value read by the topic's serdes."""

    __test__ = False  # not a pytest test class

    key: Any
    value: Any
    timestamp: int
    headers: Headers = ()
    topic: str = ""
    partition: int = 0
    offset: int = 0


class TestInputTopic:
    """Pipes records into one source topic of a :class:`TopologyTestDriver`; each is processed,
    with all it causes, before ``pipe`` returns."""

    __test__ = False

    def __init__(self, driver: Piper, name: str, key_serde: Serde[Any], value_serde: Serde[Any]) -> None:
        self.name = name
        self._driver = driver
        self._key_serde = key_serde
        self._value_serde = value_serde

    def pipe(
        self,
        key: Any,
        value: Any,
        *,
        timestamp: int | None = None,
        headers: Iterable[tuple[str, bytes]] = (),
        partition: int | None = None,
    ) -> None:
        """Write ``key``/``value`` (None stays a null key or a tombstone) at ``timestamp`` (ms;
        default: the driver's wall-clock time) to the partition of the key (or ``partition``)."""
        key_bytes = None if key is None else self._key_serde.serialize(key)
        value_bytes = None if value is None else self._value_serde.serialize(value)
        self._driver.pipe_raw(
            self.name,
            key_bytes,
            value_bytes,
            timestamp=timestamp,
            headers=tuple(headers),
            partition=partition,
        )

    def pipe_many(
        self, records: Iterable[tuple[Any, Any]], *, timestamp: int | None = None, step_ms: int = 0
    ) -> None:
        """Pipe ``(key, value)`` pairs in order; timestamps start at ``timestamp`` and move
        ``step_ms`` per record."""
        stamp = timestamp
        for key, value in records:
            self.pipe(key, value, timestamp=stamp)
            if stamp is not None:
                stamp += step_ms


class TestOutputTopic:
    """Reads what was written to one topic, in the order it was written (across partitions);
    each record is read once."""

    __test__ = False

    def __init__(
        self, topics: InMemoryTopics, name: str, key_serde: Serde[Any], value_serde: Serde[Any]
    ) -> None:
        self.name = name
        self._topics = topics
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._read = 0

    def _unread(self) -> list[StoredRecord]:
        return self._topics.records(self.name)[self._read :]

    def read_records(self) -> list[TestRecord]:
        """Every record not read yet (and mark them read)."""
        unread = self._unread()
        self._read += len(unread)
        return [self._typed(r) for r in unread]

    def read_record(self) -> TestRecord:
        """The next unread record; raises ``LookupError`` when there is none."""
        unread = self._unread()
        if not unread:
            raise LookupError(f"no record left to read on {self.name!r}")
        self._read += 1
        return self._typed(unread[0])

    def read_key_values(self) -> list[tuple[Any, Any]]:
        return [(r.key, r.value) for r in self.read_records()]

    def read_values(self) -> list[Any]:
        return [r.value for r in self.read_records()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """The last value of each key among the unread records (a table's latest state)."""
        return dict(self.read_key_values())

    def is_empty(self) -> bool:
        return not self._unread()

    def queue_size(self) -> int:
        return len(self._unread())

    def _typed(self, r: StoredRecord) -> TestRecord:
        return TestRecord(
            key=None if r.key is None else self._key_serde.deserialize(r.key),
            value=None if r.value is None else self._value_serde.deserialize(r.value),
            timestamp=r.timestamp,
            headers=r.headers,
            topic=r.topic,
            partition=r.partition,
            offset=r.offset,
        )
