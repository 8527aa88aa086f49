"""The fallback-prior task assignor: keep the previous assignment, ask to rebalance again.

Kafka Streams falls back to it when it cannot compute lags (e.g. the end offsets could not be
fetched): every task keeps its previous active owner (the lowest process id when several claim
it) and every previous standby stays where it was, whatever the balance; only tasks nobody ran
are placed, sticky and balanced as the sticky assignor would. The result always asks for a
follow-up rebalance ``probing_rebalance_interval_ms`` after ``now_ms``, when the lags may be
known.
"""

from __future__ import annotations

from typing import ClassVar

from assignors.task.indexed import build_assignment, index_state
from assignors.task.quota import balanced_fill
from assignors.task.standby import place_standbys, signatures_for
from assignors.types import ApplicationState, TaskAssignment

__all__ = ["FallbackPriorTaskAssignor"]


class FallbackPriorTaskAssignor:
    """Preserves the previous active and standby assignment; always requests a follow-up."""

    name: ClassVar[str] = "fallback_prior"

    def assign(self, state: ApplicationState) -> TaskAssignment:
        ix = index_state(state)
        nt = ix.num_tasks
        owner = [-1] * nt
        counts = [0] * ix.num_processes
        start, items = ix.prev_active.start, ix.prev_active.items
        for i in range(nt):
            if start[i] < start[i + 1]:
                p = items[start[i]]
                owner[i] = p
                counts[p] += 1
        rest = [i for i in range(nt) if owner[i] < 0]
        balanced_fill(rest, ix.capacity, counts, owner, sticky=ix.prev_active, secondary=ix.prev_standby.row)
        stateful = [i for i in range(nt) if ix.stateful[i]]
        standbys = place_standbys(
            stateful,
            num_tasks=nt,
            capacity=ix.capacity,
            owner=owner,
            replicas=state.configs.num_standby_replicas,
            preferred=lambda i: (*ix.prev_standby.row(i), *ix.prev_active.row(i)),
            signatures=signatures_for(state, ix.process_ids),
            keep=ix.prev_standby.row,
        )
        configs = state.configs
        return build_assignment(
            ix, owner, standbys, followup_rebalance_ms=state.now_ms + configs.probing_rebalance_interval_ms
        )
