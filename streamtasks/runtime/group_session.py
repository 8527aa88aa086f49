"""The KIP-848 session timeout a coordinator applies to a group, read once at start.

Under the consumer protocol the member sends no session timeout: the coordinator expires a
member after the group's ``consumer.session.timeout.ms`` (a group config, KIP-848), which
defaults to the broker's ``group.consumer.session.timeout.ms`` (45 s). The member gives its
partitions up when no heartbeat sent that long ago was answered, so it must use the
coordinator's value, not the client's ``session.timeout.ms``: one DescribeConfigs (v4) of the
GROUP resource, which Apache Kafka answers with the group's effective value (the group's own
setting, else the broker's). A ``streamtasks coordinator`` answers it with its own
``--session-timeout-ms``. A server that does not serve DescribeConfigs v4, refuses it (no
``DescribeConfigs`` right on the group) or names no value leaves the configured
``session.timeout.ms``, with a log line saying so.
"""

from __future__ import annotations

import logging

from kio.schema.describe_configs.v4 import request as describe_req
from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
from kio.static.primitive import i8

from streamtasks.errors import StreamTasksError
from streamtasks.membership.consumer import SessionTimeoutKnown
from streamtasks.runtime.connection import AsyncConnection
from streamtasks.runtime.consumer_driver import served_versions

__all__ = [
    "DESCRIBE_CONFIGS_API_KEY",
    "DESCRIBE_CONFIGS_VERSION",
    "GROUP_RESOURCE_TYPE",
    "SESSION_TIMEOUT_KEY",
    "coordinator_session_timeout",
    "describe_group_session_request",
    "session_timeout_from",
]

DESCRIBE_CONFIGS_API_KEY = 32
DESCRIBE_CONFIGS_VERSION = 4
#: ConfigResource.Type.GROUP (KIP-848 group configs).
GROUP_RESOURCE_TYPE = 32
SESSION_TIMEOUT_KEY = "consumer.session.timeout.ms"

log = logging.getLogger("streamtasks.driver")


def describe_group_session_request(group_id: str) -> describe_req.DescribeConfigsRequest:
    return describe_req.DescribeConfigsRequest(
        resources=(
            describe_req.DescribeConfigsResource(
                resource_type=i8(GROUP_RESOURCE_TYPE),
                resource_name=group_id,
                configuration_keys=(SESSION_TIMEOUT_KEY,),
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )


def session_timeout_from(response: DescribeConfigsResponse, group_id: str) -> int | str:
    """The group's session timeout in the answer, or why there is none."""
    for result in response.results:
        if int(result.resource_type) != GROUP_RESOURCE_TYPE or result.resource_name != group_id:
            continue
        if result.error_code.value != 0:
            return f"{result.error_code.name.upper()} {result.error_message or ''}".strip()
        for entry in result.configs:
            if entry.name == SESSION_TIMEOUT_KEY and entry.value is not None:
                try:
                    value = int(entry.value)
                except ValueError:
                    return f"{SESSION_TIMEOUT_KEY}={entry.value!r} is not a number"
                return value if value > 0 else f"{SESSION_TIMEOUT_KEY}={value} is not positive"
        return f"no {SESSION_TIMEOUT_KEY} in the answer"
    return f"no answer for group {group_id!r}"


async def coordinator_session_timeout(
    conn: AsyncConnection, group_id: str, *, configured_ms: int, where: str, timeout_s: float
) -> SessionTimeoutKnown:
    """The event that hands the member the group's session timeout; ``configured_ms`` (the
    client's ``session.timeout.ms``) when it cannot be read, logged either way."""
    found: int | str
    try:
        highest = (await served_versions(conn)).get(DESCRIBE_CONFIGS_API_KEY, -1)
        if highest < DESCRIBE_CONFIGS_VERSION:
            found = f"DescribeConfigs v{DESCRIBE_CONFIGS_VERSION} not served"
        else:
            response = await conn.call(
                describe_group_session_request(group_id), DescribeConfigsResponse, timeout_s=timeout_s
            )
            found = session_timeout_from(response, group_id)
    except (TimeoutError, StreamTasksError, OSError) as exc:
        found = f"{type(exc).__name__}: {exc}"
    if isinstance(found, int):
        log.info(
            "group %r: the coordinator's session timeout is %d ms (%s at %s); the member gives its "
            "partitions up when no heartbeat sent that long ago was answered",
            group_id,
            found,
            SESSION_TIMEOUT_KEY,
            where,
        )
        return SessionTimeoutKnown(session_timeout_ms=found, source=f"{SESSION_TIMEOUT_KEY} at {where}")
    log.warning(
        "group %r: could not read %s from %s (%s); the member gives its partitions up after "
        "session.timeout.ms (%d ms) without an answered heartbeat, which may not be the coordinator's",
        group_id,
        SESSION_TIMEOUT_KEY,
        where,
        found,
        configured_ms,
    )
    return SessionTimeoutKnown(session_timeout_ms=configured_ms, source="session.timeout.ms (fallback)")
