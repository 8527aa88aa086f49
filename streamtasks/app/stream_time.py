"""A task's stream time carried to its next owner in the committed offsets' metadata string.

Kafka Streams writes each input partition's time into the metadata of the offset it commits
(``TopicPartitionMetadata``) and a task's new owner starts from it, so a stream-time
punctuation or a window's close is judged by the time the old owner reached, not by the first
record the new one sees. The layout is Kafka Streams' own, so either side can read the other's:
base64 of one version byte (2; 1 is read too), the time as a big-endian int64, then (version
2 only) the processor metadata, empty here (Kafka Streams writes an empty map as no bytes).

Metadata this module cannot read (empty, another client's, another version) is no stream time
(-1) and a debug log line, never an error.
"""

from __future__ import annotations

import base64
import binascii
import logging
import struct

__all__ = ["UNKNOWN_TIME", "decode_stream_time", "encode_stream_time"]

log = logging.getLogger(__name__)

#: No stream time known (Kafka Streams' ``RecordQueue.UNKNOWN``).
UNKNOWN_TIME = -1
_VERSION = 2
_HEADER = struct.Struct(">bq")


def encode_stream_time(time_ms: int) -> str:
    """The metadata string carrying ``time_ms`` (Kafka Streams' ``encodeTimestamp``)."""
    return base64.b64encode(_HEADER.pack(_VERSION, time_ms)).decode("ascii")


def decode_stream_time(metadata: str | None) -> int:
    """The stream time in a committed offset's ``metadata``, or :data:`UNKNOWN_TIME`."""
    if not metadata:
        return UNKNOWN_TIME
    try:
        raw = base64.b64decode(metadata.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        log.debug("offset metadata %r is not base64: no stream time", metadata[:40])
        return UNKNOWN_TIME
    if len(raw) < _HEADER.size or raw[0] not in (1, _VERSION) or (raw[0] == 1 and len(raw) != _HEADER.size):
        log.debug("offset metadata %r is not a stream time this client knows", metadata[:40])
        return UNKNOWN_TIME
    time_ms: int = _HEADER.unpack_from(raw)[1]
    return time_ms
