"""The commit before a revocation, as every member runs it: :class:`CommitGate`.

A member that must give partitions up first commits their offsets (KIP-429's rule, and the
KIP-848 client's): it opens the gate, sends the commit when it is due, retries it after a
backoff or on a new coordinator, and gives the partitions up once the commit is answered or the
gate's deadline has passed. :class:`CommitGate` is the one owner of the member's
:class:`~.records.Gate` (h11's rule) and issues the commit through the member's
:class:`~.kernel.Kernel`; what an answer means, and what follows the revocation, is the
protocol's and stays in its machine.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Generic

from streamtasks.membership.common.kernel import Kernel
from streamtasks.membership.common.records import Gate, Purpose
from streamtasks.membership.common.requests import ApiT
from topology.ids import TopicPartition

__all__ = ["CommitGate"]


class CommitGate(Generic[ApiT]):
    """The commit before a revocation under way (``gate``; ``None``: none)."""

    __slots__ = ("_api", "_gate", "_k")

    def __init__(self, kernel: Kernel[Any, ApiT, Any, Any], api: ApiT) -> None:
        self._k = kernel
        self._api = api
        self._gate: Gate | None = None

    @property
    def gate(self) -> Gate | None:
        return self._gate

    def open(
        self,
        purpose: Purpose,
        partitions: frozenset[TopicPartition],
        now_ms: int,
        deadline_ms: int,
        *,
        assignment: frozenset[TopicPartition] = frozenset(),
        user_data: bytes = b"",
    ) -> None:
        """Commit ``partitions`` before revoking them, by ``deadline_ms`` at the latest;
        ``assignment`` and ``user_data``: what to own afterwards (the classic SyncGroup)."""
        self._gate = Gate(
            purpose=purpose,
            partitions=partitions,
            deadline_ms=deadline_ms,
            retry_at_ms=now_ms,
            assignment=assignment,
            user_data=user_data,
        )

    def close(self) -> None:
        """No commit before a revocation any more (the member left or was reset)."""
        self._gate = None

    def due(self, now_ms: int, coordinator_known: bool) -> Gate | None:
        """The gate, when its commit is to be sent now (see :meth:`Gate.due`)."""
        gate = self._gate
        return gate if gate is not None and gate.due(now_ms, coordinator_known) else None

    def commit(self, deadline_ms: int, generation: int) -> int:
        """Issue the commit (the member emits its ``CommitOffsets``); its request id."""
        assert self._gate is not None
        rid = self._k.issue(self._api, deadline_ms, generation)
        self._gate = replace(self._gate, commit_id=rid)
        return rid

    def answered(self) -> Gate | None:
        """The gate, now that its commit was answered (no commit in flight); ``None``: none."""
        if self._gate is not None:
            self._gate = replace(self._gate, commit_id=None)
        return self._gate

    def retry_at(self, at_ms: int) -> None:
        """Send the commit again at ``at_ms``."""
        if self._gate is not None:
            self._gate = replace(self._gate, retry_at_ms=at_ms)

    def dropped(self) -> None:
        """The member gave up every request in flight: the commit, if any, is not waited for."""
        if self._gate is not None:
            self._gate = replace(self._gate, commit_id=None)

    def resend(self, now_ms: int) -> None:
        """The coordinator is gone: commit again, as soon as a new one is known."""
        self.dropped()
        self.retry_at(now_ms)

    def expired(self, now_ms: int) -> bool:
        """Whether the gate's deadline has passed (the partitions are revoked anyway)."""
        return self._gate is not None and now_ms >= self._gate.deadline_ms

    def without(self, gone: frozenset[TopicPartition]) -> None:
        """Partitions that no longer exist are neither committed nor owned afterwards."""
        if self._gate is not None:
            g = self._gate
            self._gate = replace(g, partitions=g.partitions - gone, assignment=g.assignment - gone)

    def finish(self) -> Gate:
        """The gate, now closed; its commit, if one is in flight, is no longer waited for."""
        gate = self._gate
        assert gate is not None
        self._gate = None
        if gate.commit_id is not None:
            self._k.settle(gate.commit_id)
        return gate
