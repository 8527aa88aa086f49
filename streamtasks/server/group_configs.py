"""DescribeConfigs of GROUP resources, answered by the coordinator itself.

A KIP-848 member reads its group's ``consumer.session.timeout.ms`` at start and gives its
partitions up when no heartbeat sent that long ago was answered
(:mod:`streamtasks.runtime.group_session`). Forwarded to the backing cluster, the request would
be answered with the cluster's value, not the one this coordinator expires members after
(``--session-timeout-ms``): a member trusting a longer one would keep partitions the coordinator
has handed to others. So a DescribeConfigs naming only GROUP resources is answered here, with
this coordinator's consumer-group session timeout and heartbeat interval (read-only, a static
setting); any other DescribeConfigs is forwarded as before (an open listener) or refused (a
secured one: it is not advertised there, and a member falls back to its own setting).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from streamtasks.server.offset_api import element, make
from streamtasks.server.wire import decode_kio_request, encode_kio_response, kio_response_class

__all__ = ["DESCRIBE_CONFIGS", "DESCRIBE_CONFIGS_VERSIONS", "GROUP_RESOURCE", "describe_group_configs"]

DESCRIBE_CONFIGS = 32
#: The versions kio has (Apache Kafka 4 serves 1-4).
DESCRIBE_CONFIGS_VERSIONS = (1, 4)
GROUP_RESOURCE = 32
#: ConfigSource STATIC_BROKER_CONFIG: set when the server started.
_STATIC = 4
#: ConfigType INT.
_INT = 3
_ZERO = datetime.timedelta(0)


def describe_group_configs(
    version: int, correlation_id: int, body: bytes, *, session_timeout_ms: int, heartbeat_interval_ms: int
) -> bytes | None:
    """The response frame, or None when the request names a resource that is not a group (or a
    version not handled here): forward it."""
    lo, hi = DESCRIBE_CONFIGS_VERSIONS
    if not lo <= version <= hi:
        return None
    request = decode_kio_request(DESCRIBE_CONFIGS, version, body)
    if not request.resources or any(int(r.resource_type) != GROUP_RESOURCE for r in request.resources):
        return None
    values = {
        "consumer.session.timeout.ms": str(session_timeout_ms),
        "consumer.heartbeat.interval.ms": str(heartbeat_interval_ms),
    }
    cls = kio_response_class(DESCRIBE_CONFIGS, version)
    result_cls = element(cls, "results")
    entry_cls = element(result_cls, "configs")
    results = []
    for resource in request.resources:
        keys = resource.configuration_keys
        wanted = sorted(values) if keys is None or not keys else [k for k in keys if k in values]
        configs: list[Any] = [
            make(
                entry_cls,
                name=name,
                value=values[name],
                read_only=True,
                config_source=i8(_STATIC),
                is_default=False,
                is_sensitive=False,
                synonyms=(),
                config_type=i8(_INT),
                documentation=None,
            )
            for name in wanted
        ]
        results.append(
            make(
                result_cls,
                error_code=ErrorCode(0),
                error_message=None,
                resource_type=i8(GROUP_RESOURCE),
                resource_name=resource.resource_name,
                configs=tuple(configs),
            )
        )
    response: Any = make(cls, throttle_time=_ZERO, results=tuple(results))
    return encode_kio_response(response, correlation_id)
