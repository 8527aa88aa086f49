"""The sticky task assignor: balanced per thread, keeping tasks where they ran, ignoring lags.

Actives (stateful and stateless together) get per-thread quotas
(:func:`~assignors.task.quota.balanced_fill`): a task stays with its previous active owner while
that process is within quota, then goes to a process that held a standby of it, then to the
processes that are still below quota. Standbys stay with previous standby holders (or a former
active owner) within their quota, otherwise go to the least loaded eligible process, spread
across racks / client tags. The answer is final: no follow-up rebalance is requested.
"""

from __future__ import annotations

from typing import ClassVar

from assignors.task.indexed import build_assignment, index_state
from assignors.task.quota import balanced_fill
from assignors.task.standby import place_standbys, signatures_for
from assignors.types import ApplicationState, TaskAssignment

__all__ = ["StickyTaskAssignor"]


class StickyTaskAssignor:
    """Kafka Streams' sticky assignor, shaped for KIP-924 (no lag awareness, no warm-ups)."""

    name: ClassVar[str] = "sticky"

    def assign(self, state: ApplicationState) -> TaskAssignment:
        ix = index_state(state)
        nt = ix.num_tasks
        owner = [-1] * nt
        counts = [0] * ix.num_processes
        balanced_fill(
            range(nt), ix.capacity, counts, owner, sticky=ix.prev_active, secondary=ix.prev_standby.row
        )
        stateful = [i for i in range(nt) if ix.stateful[i]]
        standbys = place_standbys(
            stateful,
            num_tasks=nt,
            capacity=ix.capacity,
            owner=owner,
            replicas=state.configs.num_standby_replicas,
            preferred=lambda i: (*ix.prev_standby.row(i), *ix.prev_active.row(i)),
            signatures=signatures_for(state, ix.process_ids),
        )
        return build_assignment(ix, owner, standbys)
