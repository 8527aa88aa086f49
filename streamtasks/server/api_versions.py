"""ApiVersions as the server answers it: the backing broker's list rewritten with the APIs the
server serves itself, at the versions it serves, the refused group APIs left out (forwarded, they
would build a second group of the same id in the cluster), and the private keys added."""

from __future__ import annotations

import dataclasses
import datetime
import struct
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from streamtasks.protocol import assignment_rpc as rpc
from streamtasks.protocol.consumer_group import (
    CONSUMER_GROUP_DESCRIBE_API_KEY,
    CONSUMER_GROUP_HEARTBEAT_API_KEY,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.server import classic_api, offset_api, streams_api, txn_api
from streamtasks.server.wire import API_VERSIONS, encode_kio_response, kio_response_class

__all__ = [
    "FIND_COORDINATOR",
    "MAX_API_VERSIONS_VERSION",
    "REFUSED_APIS",
    "SERVED_VERSIONS",
    "advertised_apis",
    "api_versions_response",
    "rewrite_api_versions",
    "unsupported_api_versions",
]

_ZERO = datetime.timedelta(0)
FIND_COORDINATOR = 10
#: API key -> the versions the server answers itself (FindCoordinator and TxnOffsetCommit also
#: capped by the broker's; TxnOffsetCommit left out when the broker lacks it).
SERVED_VERSIONS: dict[int, tuple[int, int]] = {
    FIND_COORDINATOR: (0, 6),
    txn_api.TXN_OFFSET_COMMIT: txn_api.TXN_OFFSET_COMMIT_VERSIONS,
    offset_api.OFFSET_COMMIT: offset_api.OFFSET_COMMIT_VERSIONS,
    offset_api.OFFSET_FETCH: offset_api.OFFSET_FETCH_VERSIONS,
    CONSUMER_GROUP_HEARTBEAT_API_KEY: (0, 1),
    CONSUMER_GROUP_DESCRIBE_API_KEY: (0, 1),
    rpc.PREPARE_ASSIGNMENT_API_KEY: (0, 0),
    rpc.INSTALL_ASSIGNMENT_API_KEY: (0, 0),
    **classic_api.VERSIONS,
    **streams_api.VERSIONS,
}
#: Group APIs of other protocols the server does not serve and must not forward (the backing
#: cluster would coordinate a second group of the same id): not advertised; a request for one
#: closes the connection. DeleteGroups, OffsetDelete, ShareGroupHeartbeat/Describe.
REFUSED_APIS = frozenset({42, 47, 76, 77})
#: Served only where the backing broker has them, at the versions both read.
_CAPPED = frozenset({FIND_COORDINATOR, txn_api.TXN_OFFSET_COMMIT})


#: The highest ApiVersions version the server reads (kio's); a client asking for a newer one is
#: answered as a broker answers it: v0, UNSUPPORTED_VERSION, ApiVersions' own range, so the
#: client retries with one it shares (the Java 4.4 client starts at v5).
MAX_API_VERSIONS_VERSION = 4


def unsupported_api_versions(correlation_id: int) -> bytes:
    cls = kio_response_class(API_VERSIONS, 0)
    entry = offset_api.element(cls, "api_keys")
    response = cls(
        error_code=ErrorCode(int(KafkaErrorCode.UNSUPPORTED_VERSION)),
        api_keys=(entry(api_key=API_VERSIONS, min_version=0, max_version=MAX_API_VERSIONS_VERSION),),
    )
    return encode_kio_response(response, correlation_id)


def advertised_apis(broker: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """The broker's APIs with the server's own at the versions it serves, the refused ones out."""
    out = {k: v for k, v in broker.items() if k not in REFUSED_APIS}
    for api_key, (lo, hi) in SERVED_VERSIONS.items():
        if api_key == txn_api.TXN_OFFSET_COMMIT and api_key not in broker:
            continue  # a backing cluster without transactions: nothing to forward to
        if api_key in _CAPPED and api_key in broker:
            out[api_key] = (max(lo, broker[api_key][0]), min(hi, broker[api_key][1]))
        else:
            out[api_key] = (lo, hi)
    return out


def api_versions_response(version: int, correlation_id: int, apis: dict[int, tuple[int, int]]) -> bytes:
    """An ApiVersions response frame listing ``apis``, built here (nothing forwarded)."""
    cls = kio_response_class(API_VERSIONS, version)
    entry = offset_api.element(cls, "api_keys")
    entries = tuple(entry(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(apis.items()))
    response = offset_api.make(cls, error_code=ErrorCode(0), api_keys=entries, throttle_time=_ZERO)
    return encode_kio_response(response, correlation_id)


def rewrite_api_versions(frame: bytes, version: int) -> bytes:
    """The backing broker's ApiVersions response frame with the server's own APIs at the
    versions it serves and the refused ones left out."""
    payload = frame[4:]
    (correlation_id,) = struct.unpack_from(">i", payload, 0)
    body = payload[4:]

    def read(v: int) -> Any:
        cls = kio_response_class(API_VERSIONS, v)
        entity, _ = entity_reader(cls)(memoryview(body), 0)
        return entity

    try:
        response = read(version)
    except Exception:  # the broker answered v0 (it does when the requested version is too new)
        response = read(0)
    if int(response.error_code.value) != 0:
        return frame
    entry_cls = type(response.api_keys[0]) if response.api_keys else None
    if entry_cls is None:
        return frame
    broker = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
    out = advertised_apis(broker)
    entries = tuple(
        entry_cls(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(out.items())
    )
    return encode_kio_response(dataclasses.replace(response, api_keys=entries), correlation_id)
