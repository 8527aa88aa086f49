"""The window store's key layout against Kafka Streams' own ``WindowKeySchema`` (kafka-streams
from Maven Central, the oracle's pom; ``java/windowkey/WindowKeys.java``, compiled at first use):
the same store key bytes for the same key, window start and sequence number, and the same parts
read back. Skipped with the reason where Java or Maven is missing."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from streamtasks.embedded.java import JavaUnavailable, compiled_program
from streamtasks.embedded.kafka_broker import kafka_classpath
from streamtasks.errors import BrokerError
from streamtasks.state import split_window_key, window_key
from tests.oracle import ORACLE_POM

SOURCE = Path(__file__).resolve().parents[2] / "java/windowkey/WindowKeys.java"

try:
    PROGRAM = compiled_program(SOURCE, kafka_classpath(ORACLE_POM), cache="java-windowkeys")
except (
    JavaUnavailable,
    BrokerError,
) as exc:  # no JDK, or Maven could not resolve the jars  # pragma: no cover - depends on the machine
    pytest.skip(f"Kafka Streams' jars cannot run here: {exc}", allow_module_level=True)


def cases() -> list[tuple[bytes, int, int]]:
    rng = random.Random(28)
    fixed = [
        (b"", 0, 0),
        (b"user-1", 1_700_000_040_000, 0),
        # Kafka's TimeWindow needs start < end: the largest start it reads back is 2**63 - 1 - size
        (b"a", 2**63 - 1 - 60_000, 2**31 - 1),
        (b"\x00\xff" * 9, 60_000, 1),
    ]
    drawn = [
        (rng.randbytes(rng.randrange(0, 24)), rng.randrange(0, 2**63 - 60_000), rng.randrange(0, 2**31))
        for _ in range(200)
    ]
    return fixed + drawn


def test_store_keys_are_byte_for_byte_kafka_streams() -> None:
    rows = cases()
    stdin = "".join(f"{k.hex() or '-'} {start} {seq}\n" for k, start, seq in rows)
    done = subprocess.run(
        PROGRAM.command(), input=stdin, capture_output=True, text=True, check=True, timeout=120
    )
    answers = done.stdout.splitlines()
    assert len(answers) == len(rows)
    for (key, start, seq), answer in zip(rows, answers, strict=True):
        stored_hex, key_hex, start_text = answer.split(" ")
        assert window_key(key, start, seq).hex() == stored_hex
        kafka_key = b"" if key_hex == "-" else bytes.fromhex(key_hex)
        assert (kafka_key, int(start_text)) == (key, start)
        assert split_window_key(bytes.fromhex(stored_hex)) == (key, start, seq)
