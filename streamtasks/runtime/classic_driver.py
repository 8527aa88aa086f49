"""The asyncio driver of a classic group member.

It owns no protocol logic: it feeds responses, failures and timer ticks into a
:class:`~streamtasks.membership.classic.ClassicMember`, executes the actions it returns in order,
and sleeps until the member's next deadline or the next event (the loop shared with the KIP-848
driver, :class:`~streamtasks.runtime.member_loop.MemberLoop`). Requests run as tasks, so
heartbeats keep going while the application processes records.
"""

from __future__ import annotations

import logging
from typing import Any

from streamtasks.membership.classic import (
    ClassicMember,
    MemberState,
    MetadataUpdated,
    ResponseReceived,
)
from streamtasks.protocol.classic_group import JoinGroupRequest
from streamtasks.runtime.member_loop import MemberLoop

__all__ = ["MemberDriver"]

log = logging.getLogger("streamtasks.driver")


class MemberDriver(MemberLoop[ClassicMember]):
    """Runs one classic member until it has left the group (or failed)."""

    def finished(self) -> bool:
        return self.member.state in (MemberState.CLOSED, MemberState.FAILED)

    def left(self) -> bool:
        return self.member.state is MemberState.CLOSED

    def describe(self) -> tuple[object, str, int]:
        return self.member.state, self.member.member_id, self.member.generation

    def request_timeout_ms(self, request: Any) -> int:
        timeout_ms = self._request_timeout_ms
        if isinstance(request, JoinGroupRequest):
            timeout_ms += self.member.config.rebalance_timeout_ms
        return timeout_ms

    async def request(self, request: Any, timeout_ms: int) -> Any:
        return await self._client.send(request, timeout_s=timeout_ms / 1000)

    def response_event(self, request_id: int, response: Any) -> ResponseReceived:
        log.debug("<- %s", response)
        return ResponseReceived(request_id=request_id, response=response)

    async def metadata_event(self) -> tuple[MetadataUpdated, tuple[str, ...]]:
        topics = self.member.config.topics
        counts = await self._host.partition_counts(topics)
        return MetadataUpdated(partitions_per_topic=counts), tuple(t for t in topics if t not in counts)
