"""ListGroups on a secured listener: the coordinator's own groups, only those the principal may
``Describe`` (Kafka's rule), instead of forwarding the request (which would list the cluster's
groups under the coordinator's identity). An open listener still forwards it
(``docs/coordinator.md``)."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from streamtasks.server.offset_api import element, make
from streamtasks.server.wire import decode_kio_request, encode_kio_response, kio_response_class

__all__ = ["LIST_GROUPS", "LIST_GROUPS_VERSIONS", "list_groups"]

LIST_GROUPS = 16
LIST_GROUPS_VERSIONS = (0, 5)
_ZERO = datetime.timedelta(0)


def list_groups(
    version: int,
    correlation_id: int,
    body: bytes,
    *,
    states: Mapping[str, str],
    may_describe: Callable[[str], bool],
) -> bytes:
    """The response frame. ``states``: group id -> its state's name (``Stable``, ...)."""
    request = decode_kio_request(LIST_GROUPS, version, body)
    wanted_states = {s.lower() for s in getattr(request, "states_filter", ()) or ()}
    wanted_types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
    cls = kio_response_class(LIST_GROUPS, version)
    entry = element(cls, "groups")
    listed = []
    if not wanted_types or "consumer" in wanted_types:
        for group_id, state in sorted(states.items()):
            if wanted_states and state.lower() not in wanted_states:
                continue
            if not may_describe(group_id):  # silently left out, as Kafka does
                continue
            listed.append(
                make(
                    entry,
                    group_id=group_id,
                    protocol_type="consumer",
                    group_state=state,
                    group_type="consumer",
                )
            )
    response: Any = make(cls, throttle_time=_ZERO, error_code=ErrorCode(0), groups=tuple(listed))
    return encode_kio_response(response, correlation_id)
