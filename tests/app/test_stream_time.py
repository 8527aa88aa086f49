"""The stream time in committed offsets' metadata: Kafka Streams' ``TopicPartitionMetadata``
layout (base64 of version 2, the time as a big-endian int64, processor metadata), read back,
and what is not one (another client's string) read as no time."""

from __future__ import annotations

import base64
import logging
import struct

import pytest

from streamtasks.app.stream_time import UNKNOWN_TIME, decode_stream_time, encode_stream_time


def test_the_layout_is_kafka_streams_version_byte_then_the_time_big_endian() -> None:
    # 0x02, then 1_700_000_000_123 = 0x0000018BCFE5687B as int64 big-endian
    assert base64.b64decode(encode_stream_time(1_700_000_000_123)) == bytes.fromhex("020000018bcfe5687b")
    assert encode_stream_time(1_000) == "AgAAAAAAAAPo"


@pytest.mark.parametrize("time_ms", [0, 1, 1_000, 1_700_000_000_123, 2**63 - 1])
def test_a_time_reads_back(time_ms: int) -> None:
    assert decode_stream_time(encode_stream_time(time_ms)) == time_ms


def test_version_1_and_version_2_with_processor_metadata_are_read() -> None:
    v1 = base64.b64encode(struct.pack(">bq", 1, 42)).decode()
    # ProcessorMetadata: entry count, then per entry key length, key, int64 value
    meta = struct.pack(">ii", 1, 3) + b"win" + struct.pack(">q", 7)
    v2 = base64.b64encode(struct.pack(">bq", 2, 43) + meta).decode()
    assert (decode_stream_time(v1), decode_stream_time(v2)) == (42, 43)


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        "",
        "not base64!",
        "éé",
        "faust-metadata",  # base64 alphabet, wrong length: not padded base64
        base64.b64encode(b"\x02\x00\x01").decode(),  # too short
        base64.b64encode(struct.pack(">bq", 3, 9)).decode(),  # a version this client does not know
        base64.b64encode(struct.pack(">bq", 1, 9) + b"x").decode(),  # version 1 has nothing after
    ],
)
def test_anything_else_is_no_stream_time_and_a_debug_line(
    metadata: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="streamtasks.app.stream_time"):
        assert decode_stream_time(metadata) == UNKNOWN_TIME
    assert all(r.levelno == logging.DEBUG for r in caplog.records)
    assert bool(caplog.records) == bool(metadata)
