"""The streams records as key/value bytes: every record a busy group wrote round-trips, and
loading the decoded log rebuilds the group; bad bytes are a DecodeError."""

from __future__ import annotations

import pytest

from streamtasks.coordinator.streams import StreamsGroupCoordinator
from streamtasks.coordinator.streams.record_codec import decode_streams_record, encode_streams_record
from streamtasks.errors import DecodeError

from .support import READY, image
from .test_replay_and_describe import CONFIG, _busy_harness


def test_every_record_of_a_busy_group_round_trips() -> None:
    h = _busy_harness()
    kinds = set()
    for record in h.log:
        key, value = encode_streams_record(record)
        assert decode_streams_record(key, value) == record
        kinds.add(type(record).__name__)
    assert len(kinds) >= 9
    decoded = [decode_streams_record(*encode_streams_record(r)) for r in h.log]
    loaded = StreamsGroupCoordinator(CONFIG, image=image(READY))
    loaded.load(decoded, h.now)
    assert loaded.snapshot() == h.coordinator.snapshot()


def test_bad_bytes_are_a_decode_error() -> None:
    h = _busy_harness()
    record = next(r for r in h.log if type(r).__name__ == "StreamsMemberRecord")
    key, value = encode_streams_record(record)
    assert value is not None
    with pytest.raises(DecodeError, match="unknown record type"):
        decode_streams_record(b"\x00\x07" + key[2:], value)
    with pytest.raises(DecodeError, match="trailing"):
        decode_streams_record(key, value + b"\x00")
    with pytest.raises(DecodeError, match="not supported"):
        decode_streams_record(key, b"\x00\x05" + value[2:])
    for cut in range(2, len(value)):
        with pytest.raises(DecodeError):
            decode_streams_record(key, value[:cut])
