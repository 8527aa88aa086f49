"""The trust model of a secured listener: the coordinator talks to the backing cluster under its
own principal, so it forwards only what cannot make the cluster do, for a client, what that
client may not do (``docs/security.md``, "The coordinator's listener").

- ApiVersions: answered by the listener from the backing cluster's versions read at start
  (:func:`restrict_api_versions`): only what this listener serves, the group APIs, Metadata,
  ApiVersions, ListGroups (its own groups), SaslHandshake/SaslAuthenticate.
- Metadata: forwarded with topic auto-creation and the authorized-operations flags turned
  off, and the answer filtered by the client's topic ``Describe`` rights in the ACL file: a
  topic named in the request and not allowed is answered TOPIC_AUTHORIZATION_FAILED with no
  partitions (Kafka's answer), one not named (an all-topics request) is left out.
- Everything else the coordinator does not serve itself (Produce, Fetch, ListOffsets, the admin
  APIs, transaction and share coordinators, ...) is never forwarded: it is not advertised, and a
  request for one closes the connection. Clients fetch and produce at the brokers, under their
  own identity (the listener requires ``--routing direct``).
"""

from __future__ import annotations

import dataclasses
import io
import struct
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.server.list_groups import LIST_GROUPS, LIST_GROUPS_VERSIONS
from streamtasks.server.routing import METADATA, decode_kio_response
from streamtasks.server.sasl_server import SASL_AUTHENTICATE, SASL_HANDSHAKE
from streamtasks.server.wire import API_VERSIONS, decode_kio_request, encode_kio_response, parse_request

__all__ = [
    "FORWARDED_WHEN_GUARDED",
    "GUARDED_VERSIONS",
    "SASL_VERSIONS",
    "filter_metadata_response",
    "restrict_api_versions",
    "sanitize_metadata_request",
]

#: The APIs a guarded listener answers from the backing cluster (ApiVersions from what it read
#: at start, Metadata forwarded and filtered).
FORWARDED_WHEN_GUARDED = frozenset({API_VERSIONS, METADATA})
#: What a guarded listener answers itself besides the group APIs: SASL, and ListGroups (its own
#: groups, filtered by Describe; :mod:`.list_groups`).
SASL_VERSIONS: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
GUARDED_VERSIONS: dict[int, tuple[int, int]] = {LIST_GROUPS: LIST_GROUPS_VERSIONS}
_NO_ID = uuid.UUID(int=0)
_writers: dict[type[Any], Any] = {}


def _all_topics(request: Any, version: int) -> bool:
    topics = request.topics
    return topics is None or (version == 0 and not topics)


def sanitize_metadata_request(payload: bytes) -> tuple[bytes, bool]:
    """The request frame to forward (auto-creation and authorized operations off) and whether
    it asks for every topic."""
    header, body = parse_request(payload)
    request = decode_kio_request(METADATA, header.api_version, body)
    changes = {
        name: False
        for name in (
            "allow_auto_topic_creation",
            "include_topic_authorized_operations",
            "include_cluster_authorized_operations",
        )
        if hasattr(request, name)
    }
    request = dataclasses.replace(request, **changes)
    cls = type(request)
    if cls not in _writers:
        _writers[cls] = entity_writer(cls)
    buf = io.BytesIO()
    _writers[cls](buf, request)
    head = payload[: len(payload) - len(body)]
    out = head + buf.getvalue()
    return struct.pack(">i", len(out)) + out, _all_topics(request, header.api_version)


def filter_metadata_response(
    frame: bytes, version: int, *, all_topics: bool, may_describe: Callable[[str], bool]
) -> bytes:
    """The Metadata response frame with only the topics the client may describe."""
    correlation_id, response = decode_kio_response(METADATA, version, frame)
    topics = []
    changed = False
    for topic in response.topics:
        name = topic.name
        if name is None or may_describe(str(name)):
            topics.append(topic)
            continue
        changed = True
        if all_topics:
            continue
        values: dict[str, Any] = {
            "error_code": ErrorCode(int(KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED)),
            "partitions": (),
        }
        if hasattr(topic, "topic_id"):
            values["topic_id"] = _NO_ID
        if hasattr(topic, "is_internal"):
            values["is_internal"] = False
        topics.append(dataclasses.replace(topic, **values))
    if not changed:
        return frame
    return encode_kio_response(dataclasses.replace(response, topics=tuple(topics)), correlation_id)


def restrict_api_versions(
    advertised: dict[int, tuple[int, int]], served: set[int], *, sasl: bool
) -> dict[int, tuple[int, int]]:
    """What a guarded listener advertises: its own APIs, the forwarded ones, SASL's."""
    out = {k: v for k, v in advertised.items() if k in served or k in FORWARDED_WHEN_GUARDED}
    out.update(GUARDED_VERSIONS)
    if sasl:
        out.update(SASL_VERSIONS)
    return out
