"""The streams-group codecs against kafka-clients 4.4.0: ``java/codec/src/StreamsCodec.java``
(compiled at first use against the embedded broker's jars) reads each message streamtasks
encodes, both from its bytes and from its JSON form, and serializes it again with Kafka's
generated ``StreamsGroup*Data`` classes. The bytes must be identical both ways, the two parsed
messages equal, and Kafka's bytes must decode back to the same message. One JVM serves every
hypothesis case (4 messages x 2 versions x the profile's examples)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamtasks.embedded.java import JavaProgram, JavaUnavailable, compiled_program
from streamtasks.embedded.kafka_broker import kafka_classpath
from streamtasks.errors import StreamTasksError
from streamtasks.protocol import streams_group_codec as H
from streamtasks.protocol import streams_group_describe_codec as D
from tests.protocol import strategies_streams as S
from tests.protocol.kafka_json import to_kafka_json

SOURCE = Path(__file__).resolve().parents[2] / "java" / "codec" / "src" / "StreamsCodec.java"


def _program() -> JavaProgram:
    try:
        return compiled_program(SOURCE, kafka_classpath(), cache="java-codec")
    except JavaUnavailable as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"the Java codec check cannot run here: {exc}", allow_module_level=True)
    except StreamTasksError as exc:  # pragma: no cover - no mvn, or Maven could not resolve
        pytest.skip(f"kafka-clients 4.4.0 is not available: {exc}", allow_module_level=True)


PROGRAM = _program()


class Jvm:
    """One ``StreamsCodec`` process: a JSON line in, a JSON line out."""

    def __init__(self, program: JavaProgram) -> None:
        self.process = subprocess.Popen(
            program.command("-Xmx256m", "-XX:TieredStopAtLevel=1"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.cases = 0

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the JVM exited ({self.process.poll()})"
        self.cases += 1
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


@pytest.fixture(scope="module")
def jvm() -> Iterator[Jvm]:
    process = Jvm(PROGRAM)
    try:
        yield process
    finally:
        process.close()
        print(f"\nStreamsCodec.java (kafka-clients 4.4.0): {process.cases} message(s) compared in one JVM")


Codec = tuple[
    Callable[[Any, int], bytes], Callable[[bytes, int], Any], Callable[[int], st.SearchStrategy[Any]]
]

CODECS: dict[str, Codec] = {
    "heartbeat_request": (
        H.encode_streams_heartbeat_request,
        H.decode_streams_heartbeat_request,
        S.heartbeat_requests,
    ),
    "heartbeat_response": (
        H.encode_streams_heartbeat_response,
        H.decode_streams_heartbeat_response,
        S.heartbeat_responses,
    ),
    "describe_request": (
        D.encode_streams_describe_request,
        D.decode_streams_describe_request,
        S.describe_requests,
    ),
    "describe_response": (
        D.encode_streams_describe_response,
        D.decode_streams_describe_response,
        S.describe_responses,
    ),
}


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("message", sorted(CODECS))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_bytes_identical_with_kafka_clients(
    jvm: Jvm, message: str, version: int, data: st.DataObject
) -> None:
    encode, decode, strategy = CODECS[message]
    value = data.draw(strategy(version), label=message)
    ours = encode(value, version)
    answer = jvm.ask(
        {"message": message, "version": version, "hex": ours.hex(), "json": to_kafka_json(value)}
    )
    assert "error" not in answer, answer["error"]
    assert answer["reencoded"] == ours.hex(), "Kafka re-serializes streamtasks' bytes differently"
    assert answer["from_json"] == ours.hex(), "Kafka serializes the same message to other bytes"
    assert answer["equal"], "Kafka parses streamtasks' bytes to another message than the JSON"
    assert decode(bytes.fromhex(answer["from_json"]), version) == value
