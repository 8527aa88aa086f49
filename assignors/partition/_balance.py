"""Balance first, then stickiness: the engine behind ``sticky``, ``cooperative_sticky`` and
``uniform`` (internal to ``assignors.partition``).

Both functions take partition numbers from :class:`~assignors.partition._layout.Layout` and
return, per member, a sorted list of partition numbers.

* :func:`quota_assign` — every member subscribes to the same topics (KIP-848's homogeneous
  uniform assignment, Kafka's "constrained" sticky assignment). With ``P`` partitions and
  ``N`` members each member's quota is ``P // N``; ``P % N`` members get one more, and those
  are the members that already own the most (ties: member order), which is what makes the
  result move the fewest partitions. Each member keeps its owned partitions up to its quota
  (the lowest-numbered ones); the rest are handed, in partition order, to the members under
  quota, in member order. The result is optimal: a member loses a partition only when it owns
  more than any balanced assignment lets it keep.
* :func:`spread_assign` — subscriptions differ (KIP-848's heterogeneous variant). Members keep
  every owned partition of a topic they subscribe to. Unowned partitions are water-filled topic
  by topic into the least-loaded subscribers (topics with the most partitions per subscriber
  first, as Kafka orders them). Then partitions move one at a time from the most-loaded holder
  of a topic to its least-loaded subscriber while their counts differ by more than one, until a
  pass over the topics moves nothing: Kafka's definition of balanced (no single move helps);
  first only partitions handed out in this round move (over every topic), then owned ones.
  That can leave a chain unbalanced (a=3, b=4, c=5, d=6 where each can only pass to the next),
  so a last step shifts partitions along chains of members, each handing a partition of a
  topic the next one subscribes to, found as blocking flows (Dinic's algorithm on the
  member-topic graph), until no member can reach one with two or more partitions fewer. Each
  shift lowers the sum of squared counts, so this ends, and then the counts are as even as
  the subscriptions allow. Whenever a member hands over a partition it gives up one it
  received in this round before one it owned. Last, at the same counts, moves are undone
  where two members allow it: a member holding a partition it did not own trades it for one
  of its own with the member holding that (if that member subscribes to the first one's
  topic), and a partition goes back to its previous owner when that owner has exactly one
  fewer than its holder (the two counts trade places). Each lowers the number of moves. Those
  trades are between two members; :func:`assignors.partition._keep.keep_more` then finds the
  fewest moves exactly (chains of trades through any number of members, a minimum-cost flow
  over member and topic counts), at the same counts or with two members one partition apart
  trading counts.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from itertools import chain, compress, repeat
from operator import lt, ne

from assignors.partition._keep import keep_more

__all__ = ["quota_assign", "spread_assign"]

_FLIP = bytes.maketrans(b"\x00\x01", b"\x01\x00")


def quota_assign(total: int, owned: Sequence[Sequence[int]]) -> list[Sequence[int]]:
    """Homogeneous balanced assignment of partitions ``0 .. total-1``; ``owned[i]`` is member
    ``i``'s sorted, conflict-free owned partitions (all below ``total``)."""
    members = len(owned)
    if members == 0:
        return []
    minimum, extra = divmod(total, members)
    quotas = [minimum] * members
    if extra:
        if any(owned):
            sizes = list(map(len, owned))
            # a stable sort, so ties stay in member order
            for i in sorted(range(members), key=sizes.__getitem__, reverse=True)[:extra]:
                quotas[i] += 1
        else:
            quotas[:extra] = [minimum + 1] * extra
    if not any(owned):  # fresh: contiguous runs in member order
        runs: list[Sequence[int]] = []
        start = 0
        for quota in quotas:
            runs.append(range(start, start + quota))
            start += quota
        return runs
    result: list[list[int]] = [
        list(mine[:quota]) if len(mine) > quota else list(mine)
        for quota, mine in zip(quotas, owned, strict=True)
    ]
    kept = bytearray(total)
    deque(map(kept.__setitem__, chain.from_iterable(result), repeat(1)), maxlen=0)
    free = list(compress(range(total), kept.translate(_FLIP)))
    position = 0
    for quota, mine in zip(quotas, result, strict=True):
        deficit = quota - len(mine)
        if deficit > 0:
            mine.extend(free[position : position + deficit])
            position += deficit
            mine.sort()
    return list(result)


def spread_assign(
    offsets: Sequence[int],
    member_topics: Sequence[Sequence[int]],
    owned: Sequence[Sequence[int]],
) -> list[list[int]]:
    """Heterogeneous balanced assignment. ``offsets[t] .. offsets[t+1]-1`` are topic ``t``'s
    partitions; ``member_topics[i]`` the topics member ``i`` subscribes to; ``owned[i]`` its
    conflict-free owned partitions, all of subscribed topics. Every topic needs a subscriber."""
    topics = len(offsets) - 1
    members = len(member_topics)
    subscribers: list[list[int]] = [[] for _ in range(topics)]
    for member, mine in enumerate(member_topics):
        for topic in mine:
            subscribers[topic].append(member)
    owner = [-1] * offsets[-1]  # partition number -> member, -1: unassigned
    counts = [0] * members
    for member, mine in enumerate(owned):
        if mine:
            counts[member] = len(mine)
            deque(map(owner.__setitem__, mine, repeat(member)), maxlen=0)
    original = owner[:]

    def order(topic: int) -> tuple[float, int, int]:
        subs = len(subscribers[topic])
        return (-(offsets[topic + 1] - offsets[topic]) / subs, subs, topic)

    live = sorted((t for t in range(topics) if subscribers[t]), key=order)
    for topic in live:
        lo, hi = offsets[topic], offsets[topic + 1]
        free = list(compress(range(lo, hi), map(lt, owner[lo:hi], repeat(0))))
        if free:
            _fill(free, subscribers[topic], counts, owner)
    movable = [t for t in live if len(subscribers[t]) > 1 and offsets[t + 1] > offsets[t]]
    # First only partitions handed out in this round move, over every topic, then owned ones
    # too: a member that can give up a new partition of another topic keeps its owned ones.
    for keep in (True, False):
        moved = True
        while moved:
            moved = False
            for topic in movable:
                lo, hi = offsets[topic], offsets[topic + 1]
                if _balance_topic(
                    lo, hi, subscribers[topic], owner=owner, original=original, counts=counts, keep_owned=keep
                ):
                    moved = True
    _shift_chains(offsets, subscribers, member_topics, owner=owner, original=original, counts=counts)
    changed = _undo_moves(offsets, member_topics, owner, original, counts)
    keep_more(offsets, member_topics, subscribers, changed, owner=owner, original=original, counts=counts)
    result: list[list[int]] = [[] for _ in range(members)]
    for number, member in enumerate(owner):
        result[member].append(number)
    return result


def _undo_moves(
    offsets: Sequence[int],
    member_topics: Sequence[Sequence[int]],
    owner: list[int],
    original: list[int],
    counts: list[int],
) -> list[int]:
    """Undo moves at the same counts (:func:`_swap_back`, :func:`_return_to_owners`) until
    neither finds one. Only partitions away from their previous owner (or that had none) are
    looked at: neither step adds to them. Returns those left."""
    changed = list(compress(range(len(owner)), map(ne, owner, original)))
    moved = [n for n in changed if original[n] >= 0]
    while moved:
        traded = _swap_back(offsets, member_topics, owner, original, moved=moved, changed=changed)
        returned = _return_to_owners(owner, original, counts, moved)
        if not traded and not returned:
            break
        changed = [n for n in changed if owner[n] != original[n]]
        moved = [n for n in moved if owner[n] != original[n]]
    return changed


def _swap_back(
    offsets: Sequence[int],
    member_topics: Sequence[Sequence[int]],
    owner: list[int],
    original: list[int],
    *,
    moved: Sequence[int],
    changed: Sequence[int],
) -> bool:
    """A member that holds a partition it did not own and lost one it owned (``moved``: the
    partitions away from their previous owner) to another member trades the first for the
    second when that member subscribes to the first one's topic: counts stay, one move fewer
    (two when the partition handed over was the other member's own). True if anything was
    traded."""
    lost: dict[int, list[int]] = {}
    for number in moved:
        lost.setdefault(original[number], []).append(number)
    strangers: dict[int, dict[int, list[int]]] = {}
    for number in changed:  # every partition not on its previous owner, or that had none
        member = owner[number]
        if member in lost and original[number] != member:
            topic = bisect_right(offsets, number) - 1
            strangers.setdefault(member, {}).setdefault(topic, []).append(number)
    traded = False
    for member in sorted(lost):
        mine = strangers.get(member)
        if not mine:
            continue
        for number in lost[member]:
            holder = owner[number]
            if holder == member:
                continue  # came back in another member's trade
            given, given_topic = -1, -1
            for topic in member_topics[holder]:
                held = mine.get(topic)
                while held and (owner[held[-1]] != member or original[held[-1]] == member):
                    held.pop()  # traded away since
                if held:
                    given, given_topic = held.pop(), topic
                    break
            if given < 0:
                continue
            owner[number], owner[given] = member, holder
            if holder in lost and original[given] != holder:
                strangers.setdefault(holder, {}).setdefault(given_topic, []).append(given)
            traded = True
    return traded


def _return_to_owners(owner: list[int], original: list[int], counts: list[int], moved: Sequence[int]) -> bool:
    """Hand a partition that moved back to its previous owner while that owner has exactly one
    partition fewer than its holder: the two counts trade places, so the balance is the same
    and one move fewer is left (which member of a balanced group ends a partition short is
    otherwise an accident of the order of the moves). Previous owners subscribe to their
    partitions' topics. True if anything returned; each return lowers the number of moves."""
    any_returned = False
    returned = True
    while returned:
        returned = False
        for number in moved:
            member, previous = owner[number], original[number]
            if previous != member and counts[previous] == counts[member] - 1:
                owner[number] = previous
                counts[member] -= 1
                counts[previous] += 1
                returned = any_returned = True
    return any_returned


def _fill(free: list[int], subscribers: list[int], counts: list[int], owner: list[int]) -> None:
    """Water-fill: raise the least-loaded subscribers level by level; leftover partitions go
    one each to the lowest-ranked of them (rank: count, then member order)."""
    ranked = sorted(subscribers, key=counts.__getitem__)  # stable: ties stay in member order
    size = len(ranked)
    remaining = len(free)
    level = counts[ranked[0]]
    group = 0  # ranked[:group] are at ``level`` once raised
    while True:
        while group < size and counts[ranked[group]] <= level:
            group += 1
        if group == size:
            break
        step = counts[ranked[group]] - level
        if remaining < step * group:
            break
        remaining -= step * group
        level += step
    rise, extra = divmod(remaining, group)
    level += rise
    gives = []
    for rank, member in enumerate(ranked[:group]):
        give = level - counts[member] + (1 if rank < extra else 0)
        counts[member] += give
        gives.append(give)
    takers = chain.from_iterable(map(repeat, ranked[:group], gives))
    deque(map(owner.__setitem__, free, takers), maxlen=0)


def _balance_topic(
    lo: int,
    hi: int,
    subscribers: list[int],
    *,
    owner: list[int],
    original: list[int],
    counts: list[int],
    keep_owned: bool = False,
) -> bool:
    """Move partitions ``lo .. hi-1`` (one topic) from their most-loaded holders to the topic's
    least-loaded subscribers until those differ by at most one. A holder gives up partitions
    it did not own before the round first; with ``keep_owned`` only those. True if anything
    moved."""
    least = min(map(counts.__getitem__, subscribers))
    if max(map(counts.__getitem__, subscribers)) - least <= 1:
        return False
    holders = set(owner[lo:hi])
    if max(map(counts.__getitem__, holders)) - least <= 1:
        return False
    parts: dict[int, list[int]] = {}
    for number in range(lo, hi):
        if not keep_owned or original[number] != owner[number]:
            parts.setdefault(owner[number], []).append(number)
    low = [(counts[m], m) for m in subscribers]
    heapq.heapify(low)
    high = [(-counts[m], m) for m in sorted(holders)]
    heapq.heapify(high)
    moved = False
    while high:
        negative, donor = high[0]
        if -negative != counts[donor] or not parts.get(donor):
            heapq.heappop(high)  # stale entry
            continue
        count, taker = low[0]
        if count != counts[taker]:
            heapq.heappop(low)  # stale entry
            continue
        if counts[donor] - count <= 1:
            break
        mine = parts[donor]
        for index in range(len(mine) - 1, -1, -1):  # hand over a partition it did not own before
            if original[mine[index]] != donor:
                number = mine.pop(index)
                break
        else:
            number = mine.pop()
        if not keep_owned or original[number] != taker:
            parts.setdefault(taker, []).append(number)
        owner[number] = taker
        counts[donor] -= 1
        counts[taker] += 1
        heapq.heapreplace(high, (-counts[donor], donor))
        heapq.heapreplace(low, (counts[taker], taker))
        heapq.heappush(high, (-counts[taker], taker))
        heapq.heappush(low, (counts[donor], donor))
        moved = True
    return moved


def _shift_chains(
    offsets: Sequence[int],
    subscribers: list[list[int]],
    member_topics: Sequence[Sequence[int]],
    *,
    owner: list[int],
    original: list[int],
    counts: list[int],
) -> None:
    """Finish what single moves cannot: shift one partition at a time along chains
    ``u -> w1 -> ... -> v`` (each member hands a partition of a topic the next one subscribes
    to) while some member has two or more partitions more than a member it can reach. Each
    shift lowers the sum of squared counts; when no chain is left the counts are as even as
    the subscriptions allow (for a convex cost, no improving path means optimal)."""
    active = [m for m, topics in enumerate(member_topics) if topics]
    values = list(map(counts.__getitem__, active))
    if max(values, default=0) - min(values, default=0) <= 1:
        return
    topic_of: list[int] = []
    for topic in range(len(offsets) - 1):
        topic_of.extend(repeat(topic, offsets[topic + 1] - offsets[topic]))
    hold: list[dict[int, list[int]]] = [{} for _ in counts]
    for number, member in enumerate(owner):
        hold[member].setdefault(topic_of[number], []).append(number)
    while True:
        values = list(map(counts.__getitem__, active))
        top, bottom = max(values, default=0), min(values, default=0)
        if top - bottom <= 1:
            return
        for level in range(top, bottom + 1, -1):
            if _augment(level, active, subscribers, hold, owner=owner, original=original, counts=counts):
                break
        else:
            return


def _augment(
    level: int,
    active: list[int],
    subscribers: list[list[int]],
    hold: list[dict[int, list[int]]],
    *,
    owner: list[int],
    original: list[int],
    counts: list[int],
) -> bool:
    """One phase of Dinic's blocking flow on the member-topic graph (a member points to the
    topics it holds partitions of, a topic to its subscribers). A breadth-first search layers
    it from the sources (members with ``level`` or more partitions); depth-first searches along
    strictly increasing layers then shift partitions to targets (``level - 2`` or fewer) until
    the layers are exhausted, remembering dead ends. True if anything moved."""
    sources = [m for m in active if counts[m] >= level]
    flow = _Layers(level, sources, subscribers, hold, counts)
    if not flow.reachable:
        return False
    moved = False
    for source in sources:
        while counts[source] >= level:
            path = flow.path(source)
            if path is None:
                break
            for position in range(0, len(path) - 1, 2):
                giver, topic, taker = path[position], ~path[position + 1], path[position + 2]
                mine = hold[giver][topic]
                for index in range(len(mine) - 1, -1, -1):  # hand over one it did not own before
                    if original[mine[index]] != giver:
                        number = mine.pop(index)
                        break
                else:
                    number = mine.pop()
                hold[taker].setdefault(topic, []).append(number)
                owner[number] = taker
            counts[source] -= 1
            counts[path[-1]] += 1
            moved = True
    return moved


class _Layers:
    """The layered member-topic graph of one phase. Nodes: members ``m >= 0`` and topics
    ``~t < 0``; each keeps a cursor into its out-edges, and dead ends are marked."""

    __slots__ = (
        "counts",
        "dead_members",
        "dead_topics",
        "hold",
        "level",
        "member_cursor",
        "member_distance",
        "member_topics",
        "reachable",
        "subscribers",
        "topic_cursor",
        "topic_distance",
    )

    def __init__(
        self,
        level: int,
        sources: list[int],
        subscribers: list[list[int]],
        hold: list[dict[int, list[int]]],
        counts: list[int],
    ) -> None:
        self.level, self.subscribers, self.hold, self.counts = level, subscribers, hold, counts
        self.member_distance: dict[int, int] = dict.fromkeys(sources, 0)
        self.topic_distance: dict[int, int] = {}
        self.reachable = False
        queue = deque(sources)
        while queue:
            giver = queue.popleft()
            step = self.member_distance[giver] + 1
            held = hold[giver]
            for topic in sorted(held):
                if topic in self.topic_distance or not held[topic]:
                    continue
                self.topic_distance[topic] = step
                for taker in subscribers[topic]:
                    if taker not in self.member_distance:
                        self.member_distance[taker] = step + 1
                        self.reachable = self.reachable or counts[taker] <= level - 2
                        queue.append(taker)
        self.member_topics: dict[int, list[int]] = {}
        self.member_cursor: dict[int, int] = {}
        self.topic_cursor: dict[int, int] = {}
        self.dead_members: set[int] = set()
        self.dead_topics: set[int] = set()

    def path(self, source: int) -> list[int] | None:
        """Alternating member, ~topic, member, ... from ``source`` to a target, or None."""
        stack = [source]
        while stack:
            node = stack[-1]
            if node >= 0:
                if node != source and self.counts[node] <= self.level - 2:
                    return stack
                topics = self.member_topics.get(node)
                if topics is None:
                    step = self.member_distance[node] + 1
                    held = self.hold[node]
                    topics = [t for t in sorted(held) if held[t] and self.topic_distance.get(t) == step]
                    self.member_topics[node] = topics
                held = self.hold[node]
                index = self.member_cursor.get(node, 0)
                while index < len(topics) and (
                    topics[index] in self.dead_topics or not held.get(topics[index])
                ):
                    index += 1
                self.member_cursor[node] = index
                if index < len(topics):
                    stack.append(~topics[index])
                else:
                    self.dead_members.add(node)
                    stack.pop()
            else:
                topic = ~node
                takers = self.subscribers[topic]
                step = self.topic_distance[topic] + 1
                index = self.topic_cursor.get(topic, 0)
                while index < len(takers) and (
                    takers[index] in self.dead_members or self.member_distance.get(takers[index]) != step
                ):
                    index += 1
                self.topic_cursor[topic] = index
                if index < len(takers):
                    stack.append(takers[index])
                else:
                    self.dead_topics.add(topic)
                    stack.pop()
        return None
