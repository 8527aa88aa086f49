"""Standby replica placement: never beside the active, spread across racks / client tags,
balanced per thread, and sticky.

Each stateful task gets ``min(num_standby_replicas, processes - 1)`` standbys on distinct
processes other than the one running it. The standby total is split into per-thread quotas like
the actives (:mod:`assignors.task.quota`). Placement runs in passes over the tasks:

1. a standby stays on a ``preferred`` process (previous standby, a process that holds state for
   the task, ...) that is below its quota;
2. then on one that may take an extra standby;
3. the remaining standbys go to the least loaded process (standbys per thread) among those that
   diverge most from the task's active and its already placed standbys;
4. a process still below its floor takes a standby from one above its own floor -- directly, or
   through a third process that passes one of its standbys on and takes the other's. Passes 1
   and 2 may have filled the others with exactly the tasks it could hold (it runs the rest), e.g.
   a process that joins and takes over two tasks whose standbys then have nowhere else to go.
   A process that holds state for the task is taken first; the spreading never gets worse;
   planned warm-ups count as standbys of their process (a process warming up leaves the
   standbys with their state until it has caught up).

A task's standby goes to an ``avoid`` process (where a warm-up of it is planned) only when no
other process can take it; ``keep`` pins standbys before everything else (fallback_prior).

Diversity: with ``signatures`` each process has a tuple of values (its client tags in the order of
``rack_aware_assignment_tags``, or its rack). A candidate scores one point per position whose
value is not used yet by the task's active or standbys. Pass 3 always picks a best-scoring
process; passes 1 and 2 keep a preferred process only if no eligible process scores higher.
Processes are grouped by signature and each group keeps a heap by load, so a placement costs
``O(groups + log processes)``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from assignors.task.quota import compute_quotas
from assignors.types import ApplicationState, ProcessId
from streamtasks.errors import AssignorError

__all__ = ["Signature", "place_standbys", "signatures_for"]

Signature = tuple[Hashable, ...]


def signatures_for(state: ApplicationState, process_ids: Sequence[ProcessId]) -> list[Signature] | None:
    """Per-process diversity signatures: the values of ``configs.rack_aware_assignment_tags`` in
    each process's client tags (a missing tag counts as the value ``None``), else the rack when
    any process has one, else ``None`` (no rack / tag awareness)."""
    clients = [state.clients[pid] for pid in process_ids]
    tags = state.configs.rack_aware_assignment_tags
    if tags:
        return [tuple(c.client_tags.get(t) for t in tags) for c in clients]
    if any(c.rack is not None for c in clients):
        return [(c.rack,) for c in clients]
    return None


class _Diversity:
    """Signature groups of the processes and the scoring of candidates for one task."""

    __slots__ = ("dims", "group_of", "groups", "members", "sig")

    def __init__(self, signatures: Sequence[Signature]) -> None:
        self.sig = signatures
        self.dims = len(signatures[0]) if signatures else 0
        index: dict[Signature, int] = {}
        self.group_of: list[int] = []
        self.groups: list[Signature] = []
        self.members: list[list[int]] = []
        for p, s in enumerate(signatures):
            g = index.get(s)
            if g is None:
                g = index[s] = len(self.groups)
                self.groups.append(s)
                self.members.append([])
            self.group_of.append(g)
            self.members[g].append(p)

    def used(self, taken: Sequence[int]) -> list[set[Hashable]]:
        used: list[set[Hashable]] = [set() for _ in range(self.dims)]
        for p in taken:
            for d, v in enumerate(self.sig[p]):
                used[d].add(v)
        return used

    @staticmethod
    def score(sig: Signature, used: Sequence[set[Hashable]]) -> int:
        return sum(1 for d, v in enumerate(sig) if v not in used[d])

    def acceptable(self, p: int, taken: Sequence[int]) -> bool:
        """Whether ``p`` scores as high as any process not in ``taken`` can."""
        if not self.dims:
            return True
        used = self.used(taken)
        score = self.score(self.sig[p], used)
        if score == self.dims:
            return True
        blocked: dict[int, int] = {}
        for q in taken:
            g = self.group_of[q]
            blocked[g] = blocked.get(g, 0) + 1
        for g, s in enumerate(self.groups):
            if len(self.members[g]) > blocked.get(g, 0) and self.score(s, used) > score:
                return False
        return True


def place_standbys(
    tasks: Sequence[int],
    *,
    num_tasks: int,
    capacity: Sequence[int],
    owner: Sequence[int],
    replicas: int,
    preferred: Callable[[int], Iterable[int]],
    signatures: Sequence[Signature] | None = None,
    keep: Callable[[int], Iterable[int]] | None = None,
    avoid: Mapping[int, int] | None = None,
) -> list[int]:
    """Standby slots for ``tasks``: ``k = min(replicas, processes - 1)`` per task, task ``i``
    owning slots ``[i*k, (i+1)*k)`` of the result, each a process or ``-1`` (``num_tasks * k``
    long; empty when ``k`` is 0).

    ``owner[i]`` runs task ``i`` as active; ``preferred(i)`` lists processes to keep its standbys
    on, best first; ``signatures`` (one per process, all the same length) enable rack / tag aware
    spreading; ``keep(i)`` lists processes whose standby of ``i`` stays whatever the quotas and
    the spreading say (only the active's own process and more than ``k`` are refused);
    ``avoid[i]`` is a process that gets a standby of ``i`` only if no other process can (pass 3).
    """
    n = len(capacity)
    k = min(replicas, n - 1)
    if k <= 0 or not tasks:
        return []
    counts = [0] * n
    fill = _Fill(
        slots=[-1] * (num_tasks * k),
        filled=[0] * num_tasks,
        k=k,
        capacity=capacity,
        counts=counts,
        owner=owner,
    )
    diversity = _Diversity(signatures) if signatures and signatures[0] else None
    if keep is not None:
        fill.kept(tasks, keep)
    pinned = list(fill.filled)
    quotas = compute_quotas(k * len(tasks), capacity, counts)
    avoid = avoid or {}
    fill.preferred(tasks, preferred, avoid, diversity, lo=quotas.lo, hi=None, extras=0)
    if quotas.extras:
        fill.preferred(tasks, preferred, avoid, diversity, lo=quotas.lo, hi=quotas.hi, extras=quotas.extras)
    if diversity is None:
        fill.plain(tasks, avoid)
    else:
        fill.diverse(tasks, avoid, diversity)
    fill.even(tasks, pinned, lo=quotas.lo, preferred=preferred, avoid=avoid, diversity=diversity)
    return fill.slots


@dataclass(frozen=True, slots=True, kw_only=True)
class _Fill:
    """The standby slots being filled (task ``i`` owns ``slots[i*k : i*k + filled[i]]``), the
    standbys per process (``counts``), and the passes that fill them. Pass 3: each remaining
    standby to a least loaded eligible process (load: standbys per thread after taking it), with
    racks / tags to one of a best-scoring group."""

    slots: list[int]
    filled: list[int]
    k: int
    capacity: Sequence[int]
    counts: list[int]
    owner: Sequence[int]

    def take(self, i: int, p: int) -> None:
        self.slots[i * self.k + self.filled[i]] = p
        self.filled[i] += 1
        self.counts[p] += 1

    def taken(self, i: int) -> list[int]:
        """The processes task ``i`` is on: its active's, then its standbys' so far."""
        return [self.owner[i], *self.slots[i * self.k : i * self.k + self.filled[i]]]

    def kept(self, tasks: Sequence[int], keep: Callable[[int], Iterable[int]]) -> None:
        """Pass 0: the standbys that stay whatever the quotas say (``keep``)."""
        for i in tasks:
            for p in keep(i):
                if self.filled[i] < self.k and p != self.owner[i] and p not in self.taken(i):
                    self.take(i, p)

    def preferred(
        self,
        tasks: Sequence[int],
        preferred: Callable[[int], Iterable[int]],
        avoid: Mapping[int, int],
        diversity: _Diversity | None,
        *,
        lo: Sequence[int],
        hi: Sequence[int] | None,
        extras: int,
    ) -> None:
        """Pass 1 (``hi`` None): each standby to a preferred process below its floor; pass 2:
        to one between floor and ceiling, while the ``extras`` last."""
        slots, filled, k, counts = self.slots, self.filled, self.k, self.counts
        for i in tasks:
            if filled[i] == k:
                continue
            o = self.owner[i]
            shunned = avoid.get(i, -1)
            for p in preferred(i):
                if p in (o, shunned) or p in slots[i * k : i * k + filled[i]]:
                    continue
                if (counts[p] >= lo[p]) if hi is None else not lo[p] <= counts[p] < hi[p]:
                    continue
                if diversity is not None and not diversity.acceptable(p, self.taken(i)):
                    continue
                self.take(i, p)
                extras -= 1
                if filled[i] == k or (hi is not None and not extras):
                    break
            if hi is not None and not extras:
                break

    def plain(self, tasks: Sequence[int], avoid: Mapping[int, int]) -> None:
        """One heap of every process; each process has exactly one entry, always current."""
        slots, filled, k, capacity, counts, owner = (
            self.slots,
            self.filled,
            self.k,
            self.capacity,
            self.counts,
            self.owner,
        )
        heap = [((counts[p] + 1) / capacity[p], p) for p in range(len(capacity))]
        heapq.heapify(heap)
        heappop, heappush = heapq.heappop, heapq.heappush
        for i in tasks:
            f = filled[i]
            if f == k:
                continue
            base = i * k
            o = owner[i]
            shunned = avoid.get(i, -1)
            while f < k:
                stash: list[tuple[float, int]] = []
                spare: tuple[float, int] | None = None
                while heap:
                    p = heap[0][1]
                    if p == o or p in slots[base : base + f]:
                        stash.append(heappop(heap))
                    elif p == shunned:
                        spare = heappop(heap)
                    else:
                        break
                if heap:
                    p = heap[0][1]
                    counts[p] += 1
                    heapq.heapreplace(heap, ((counts[p] + 1) / capacity[p], p))
                elif spare is not None:
                    p = spare[1]
                    counts[p] += 1
                    spare = ((counts[p] + 1) / capacity[p], p)
                else:  # cannot happen: k < processes leaves someone eligible
                    raise AssignorError(f"internal error: no process can hold a standby of task {i}")
                if spare is not None:
                    heappush(heap, spare)
                for entry in stash:
                    heappush(heap, entry)
                slots[base + f] = p
                f += 1
            filled[i] = f

    def diverse(self, tasks: Sequence[int], avoid: Mapping[int, int], diversity: _Diversity) -> None:
        """A heap per signature group (entries go stale when a count changes; they are dropped
        when met); each standby goes to the best-scoring group's least loaded process."""
        slots, filled, k, capacity, counts, owner = (
            self.slots,
            self.filled,
            self.k,
            self.capacity,
            self.counts,
            self.owner,
        )
        group_of, group_sigs = diversity.group_of, diversity.groups
        heaps: list[list[tuple[float, int]]] = [[] for _ in group_sigs]
        for p in range(len(capacity)):
            heaps[group_of[p]].append(((counts[p] + 1) / capacity[p], p))
        for heap in heaps:
            heapq.heapify(heap)
        heappop, heappush = heapq.heappop, heapq.heappush
        for i in tasks:
            base = i * k
            o = owner[i]
            shunned = avoid.get(i, -1)
            while filled[i] < k:
                chosen = slots[base : base + filled[i]]
                used = diversity.used([o, *chosen])
                best: tuple[int, float, int] | None = None
                spare: tuple[int, float, int] | None = None
                for g, heap in enumerate(heaps):
                    score = -diversity.score(group_sigs[g], used)
                    if best is not None and score > best[0]:
                        continue
                    stash: list[tuple[float, int]] = []
                    while heap:
                        key, p = heap[0]
                        if key != (counts[p] + 1) / capacity[p]:
                            heappop(heap)
                        elif p == o or p in chosen:
                            stash.append(heappop(heap))
                        elif p == shunned:
                            spare = (score, key, p)
                            stash.append(heappop(heap))
                        else:
                            if best is None or (score, key, p) < best:
                                best = (score, key, p)
                            break
                    for entry in stash:
                        heappush(heap, entry)
                if spare is not None and (best is None or spare[0] < best[0]):
                    best = spare  # spreading across racks / tags comes before a planned warm-up
                if best is None:
                    break
                p = best[2]
                slots[base + filled[i]] = p
                filled[i] += 1
                counts[p] += 1
                heappush(heaps[group_of[p]], ((counts[p] + 1) / capacity[p], p))

    def movable(
        self, i: int, src: int, dst: int, avoid: Mapping[int, int], diversity: _Diversity | None
    ) -> bool:
        """Whether task ``i``'s standby on ``src`` may go to ``dst`` instead: not beside the
        active or another standby of ``i``, not on its planned warm-up's process, and scoring
        as high on the spreading as ``src`` does."""
        if dst == self.owner[i] or dst == avoid.get(i, -1):
            return False
        others = self.taken(i)
        if dst in others:
            return False
        if diversity is None or not diversity.dims:
            return True
        others.remove(src)
        used = diversity.used(others)
        return diversity.score(diversity.sig[dst], used) >= diversity.score(diversity.sig[src], used)

    def even(
        self,
        tasks: Sequence[int],
        pinned: Sequence[int],
        *,
        lo: Sequence[int],
        preferred: Callable[[int], Iterable[int]],
        avoid: Mapping[int, int],
        diversity: _Diversity | None,
    ) -> None:
        """Pass 4: while a process is below its floor (its planned warm-ups counted as standbys:
        while it warms up, the standbys stay with their state), a standby of one above its floor
        moves to it (``pinned[i]``: task ``i``'s first standbys, kept by pass 0, never move),
        directly or through a third process (a chain of two moves), least loaded taker first."""
        counts, capacity, slots, k = self.counts, self.capacity, self.slots, self.k
        n = len(capacity)
        warming = [0] * n  # a planned warm-up counts as a standby here, as in Kafka Streams
        for p in avoid.values():
            warming[p] += 1
        held: list[list[int]] = [[] for _ in range(n)]  # movable slot indices per process
        for i in tasks:
            for j in range(i * k + pinned[i], i * k + self.filled[i]):
                held[slots[j]].append(j)

        def move(j: int, dst: int) -> None:
            src = slots[j]
            held[src].remove(j)
            held[dst].append(j)
            slots[j] = dst
            counts[src] -= 1
            counts[dst] += 1

        while True:
            short = sorted(
                ((counts[q] + warming[q]) / capacity[q], q)
                for q in range(n)
                if counts[q] + warming[q] < lo[q]
            )
            progressed = False
            for _, q in short:
                best: tuple[bool, float, int] | None = None
                for p in range(n):
                    if counts[p] <= lo[p]:
                        continue
                    for j in held[p]:
                        i = j // k
                        if self.movable(i, p, q, avoid, diversity):
                            key = (q in preferred(i), counts[p] / capacity[p], -j)
                            if best is None or key > best:
                                best = key
                if best is not None:
                    move(-best[2], q)
                    progressed = True
                    continue
                chain = self._chain(q, held, lo, avoid, diversity)
                if chain is not None:
                    j1, m, j2 = chain
                    move(j2, q)  # m passes one of its standbys to q ...
                    move(j1, m)  # ... and takes one of the overloaded process's
                    progressed = True
            if not progressed:
                return

    def _chain(
        self,
        q: int,
        held: Sequence[Sequence[int]],
        lo: Sequence[int],
        avoid: Mapping[int, int],
        diversity: _Diversity | None,
    ) -> tuple[int, int, int] | None:
        """Slot ``j1`` on a process above its floor that may go to ``m``, and slot ``j2`` on
        ``m`` that may go to ``q``; the first found, or None."""
        counts, k, n = self.counts, self.k, len(self.capacity)
        for p in range(n):
            if counts[p] <= lo[p]:
                continue
            for j1 in held[p]:
                i1 = j1 // k
                for m in range(n):
                    if m in (p, q) or not self.movable(i1, p, m, avoid, diversity):
                        continue
                    for j2 in held[m]:
                        i2 = j2 // k
                        if i2 != i1 and self.movable(i2, m, q, avoid, diversity):
                            return j1, m, j2
        return None
