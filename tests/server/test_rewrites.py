"""What the server changes in answers it forwards, on kio-built frames (no broker): Metadata lists
every broker at the server's listener for it plus the server itself (routing proxy), or the
real brokers plus the server (direct); ApiVersions carries the served APIs at the served
versions, the private keys, and none of the refused group APIs; a forwarded FindCoordinator
names the broker's listener; a too-new ApiVersions request gets v0 UNSUPPORTED_VERSION."""

from __future__ import annotations

import asyncio
import datetime

from kio.schema.api_versions.v0 import response as av0
from kio.schema.api_versions.v3 import response as av3
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import response as fc3
from kio.schema.metadata.v12 import response as md

from streamtasks.server.handlers import (
    REFUSED_APIS,
    SERVED_VERSIONS,
    rewrite_api_versions,
    unsupported_api_versions,
)
from streamtasks.server.routing import (
    BrokerProxies,
    decode_kio_response,
    rewrite_coordinators,
    rewrite_metadata,
)
from streamtasks.server.wire import encode_kio_response

NODE = 2_000_000_000
ZERO = datetime.timedelta(0)


def metadata_frame() -> bytes:
    response = md.MetadataResponse(
        throttle_time=ZERO,
        brokers=tuple(
            md.MetadataResponseBroker(node_id=n, host=f"kafka{n}", port=9092, rack=None) for n in (1, 2)
        ),
        cluster_id="c",
        controller_id=1,
        topics=(),
    )
    return encode_kio_response(response, 41)


def proxies() -> tuple[BrokerProxies, list[tuple[int, str, int]]]:
    started: list[tuple[int, str, int]] = []

    async def start(node: int, host: str, port: int, wanted: int) -> int:
        started.append((node, host, port))
        return wanted

    return BrokerProxies(start, port_base=19100), started


def test_metadata_under_proxy_routing() -> None:
    routes, started = proxies()
    frame = asyncio.run(
        rewrite_metadata(
            metadata_frame(), 12, coordinator=(NODE, "coord", 19092), proxies=routes, advertised_host="coord"
        )
    )
    correlation_id, response = decode_kio_response(3, 12, frame)
    assert correlation_id == 41
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (1, "coord", 19100),
        (2, "coord", 19101),
        (NODE, "coord", 19092),
    ]
    assert started == [(1, "kafka1", 9092), (2, "kafka2", 9092)]
    assert routes.routes() == {1: ("kafka1", 9092, 19100), 2: ("kafka2", 9092, 19101)}


def test_metadata_under_direct_routing() -> None:
    frame = asyncio.run(
        rewrite_metadata(
            metadata_frame(), 12, coordinator=(NODE, "coord", 19092), proxies=None, advertised_host="coord"
        )
    )
    _, response = decode_kio_response(3, 12, frame)
    assert [(b.node_id, b.host) for b in response.brokers] == [(1, "kafka1"), (2, "kafka2"), (NODE, "coord")]


def test_api_versions_rewritten() -> None:
    broker = [(k, 0, 9) for k in (0, 1, 3, 8, 9, 10, 11, 12, 13, 14, 18, 28, 42, 47, 68)]
    response = av3.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(av3.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in broker),
        throttle_time=ZERO,
    )
    frame = rewrite_api_versions(encode_kio_response(response, 7), 3)
    _, rewritten = decode_kio_response(18, 3, frame)
    listed = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in rewritten.api_keys}
    assert not set(listed) & REFUSED_APIS
    for api, versions in SERVED_VERSIONS.items():
        assert listed[api] == (versions if api != 10 else (0, 6))
    assert listed[0] == (0, 9)  # Produce: the broker's own range, forwarded
    assert 30848 in listed
    assert 30849 in listed


def test_too_new_api_versions_request() -> None:
    _, response = decode_kio_response(18, 0, unsupported_api_versions(5))
    assert response.error_code == ErrorCode(35)
    assert [(int(k.api_key), int(k.max_version)) for k in response.api_keys] == [(18, 4)]
    assert isinstance(response, av0.ApiVersionsResponse)


def test_forwarded_find_coordinator_names_the_listener() -> None:
    routes, _ = proxies()
    answer = fc3.FindCoordinatorResponse(
        throttle_time=ZERO, error_code=ErrorCode.none, error_message=None, node_id=2, host="kafka2", port=9092
    )
    frame = asyncio.run(
        rewrite_coordinators(encode_kio_response(answer, 3), 3, proxies=routes, advertised_host="coord")
    )
    _, response = decode_kio_response(10, 3, frame)
    assert (response.node_id, response.host, response.port) == (2, "coord", 19100)
