"""Keep more owned partitions at the same member counts: the last step of heterogeneous
balancing (internal to ``assignors.partition``, called by
:func:`~assignors.partition._balance.spread_assign`).

The balancing before it makes the member counts as even as the subscriptions allow (the
*evenest* counts: no member can pass a partition, directly or along a chain, to one with two or
more fewer) and undoes moves where two members can trade; longer trades are out of its reach.
This step finds the fewest moves exactly, among the assignments with those counts and with the
counts two members trade (one at ``k``, the other at ``k - 1``, change places: the counts stay
the evenest).

It works on counts per (member, topic): ``x``, the partitions of the topic the member holds,
and ``o``, those it owned before (valid claims). A member keeps at best ``min(x, o)`` of a topic
(the partitions themselves are chosen at the end, :meth:`_Group.rebuild`), so the number of
moves is ``sum(o - min(x, o))``. That is a minimum-cost flow: partitions flow from topics to
members, a unit on (topic, member) costs -1 while ``x < o`` (kept) and 0 beyond. Its residual
graph has the members, the topics and a node per count ``k``:

* member -> topic: the member gives a partition of the topic it holds: cost 0 if ``x > o``
  (it gives one it did not own), else +1 (it loses one it owned);
* topic -> member: a subscriber takes one: cost -1 if ``x < o``, else 0;
* member -> count ``k + 1`` (its count ``k`` rises), count ``k`` -> member (its count ``k``
  falls): cost 0.

A negative cycle keeps more partitions: through a count node, a member at ``k - 1`` ends with
``k`` and one at ``k`` with ``k - 1``; without one, no count changes. With no negative cycle
left the moves are the fewest (the flow optimality condition), so cycles are cancelled until
none is left, each keeping at least one more partition: at most as many rounds as moved
partitions.

The search is Bellman-Ford (queue-based) from every node at distance 0, as from a virtual
source: only negative distances spread, starting at the -1 edges (members short of partitions
they owned), and a node is expanded only when one of its edges can still lower a distance: a
rebalance touches a handful of members, not the group. A cycle in the predecessor graph is a
negative cycle; it is looked for each time the relaxations since the last look pass the number
of nodes reached.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence

__all__ = ["keep_more"]

#: A member ``m >= 0``, a topic ``~t`` (``-1 .. -topics``), or a count ``k``
#: (:meth:`_Group.level`, below the topics).
Node = int
#: ``lower(node, value, via)``: the search's relaxation (:meth:`_Group.negative_cycle`).
_Lower = Callable[[Node, int, Node], None]


def keep_more(
    offsets: Sequence[int],
    member_topics: Sequence[Sequence[int]],
    subscribers: Sequence[Sequence[int]],
    changed: Sequence[int],
    *,
    owner: list[int],
    original: Sequence[int],
    counts: list[int],
) -> None:
    """Move partitions (``owner``, ``counts`` updated) so that the fewest are away from their
    previous owner, within the bounds of the module docstring. ``changed``: the partitions away
    from their previous owner, or that had none."""
    if not any(original[n] >= 0 for n in changed):
        return
    group = _Group(offsets, member_topics, subscribers, owner=owner, original=original, counts=counts)
    group.seed(changed)
    for _ in range(len(changed)):  # each cycle keeps at least one more
        cycle = group.negative_cycle()
        if cycle is None:
            break
        group.cancel(cycle)
    group.rebuild()


class _Group:
    """Per (member, topic) counts, bounds and the cycle search (module docstring)."""

    def __init__(
        self,
        offsets: Sequence[int],
        member_topics: Sequence[Sequence[int]],
        subscribers: Sequence[Sequence[int]],
        *,
        owner: list[int],
        original: Sequence[int],
        counts: list[int],
    ) -> None:
        self.offsets = offsets
        self.member_topics = member_topics
        self.subscribers = subscribers
        self.owner = owner
        self.original = original
        self.counts = counts
        self._topics = len(offsets) - 1
        self.members = range(len(counts))
        self._held: dict[tuple[int, int], int] = {}
        self._owned: dict[tuple[int, int], int] = {}
        #: topic -> members whose held count of it changed here (owner is not, until rebuild)
        self._moved: dict[int, set[int]] = {}
        #: (member, topic) with x > o, and with x < o
        self._loose: set[tuple[int, int]] = set()
        self._short: set[tuple[int, int]] = set()
        #: member -> how many of its topics are loose
        self._loose_topics: dict[int, int] = {}

    def level(self, k: int) -> Node:
        """The node of count ``k``."""
        return ~(self._topics + k)

    def held(self, m: int, t: int) -> int:
        key = (m, t)
        value = self._held.get(key)
        if value is None:
            value = self._held[key] = self.owner[self.offsets[t] : self.offsets[t + 1]].count(m)
        return value

    def owned(self, m: int, t: int) -> int:
        key = (m, t)
        value = self._owned.get(key)
        if value is None:
            value = self._owned[key] = self.original[self.offsets[t] : self.offsets[t + 1]].count(m)
        return value

    def seed(self, changed: Sequence[int]) -> None:
        offsets = self.offsets
        for n in changed:
            t = bisect_right(offsets, n) - 1
            for m in (self.owner[n], self.original[n]):
                if m >= 0:
                    self._classify(m, t)

    def _classify(self, m: int, t: int) -> None:
        key = (m, t)
        x, o = self.held(m, t), self.owned(m, t)
        was_loose = key in self._loose
        self._loose.discard(key)
        self._short.discard(key)
        if x > o:
            self._loose.add(key)
        elif x < o:
            self._short.add(key)
        now_loose = x > o
        if was_loose != now_loose:
            self._loose_topics[m] = self._loose_topics.get(m, 0) + (1 if now_loose else -1)

    def negative_cycle(self) -> list[Node] | None:
        """The nodes of a negative cycle in edge order, or None when there is none."""
        dist: dict[Node, int] = {}
        pred: dict[Node, Node] = {}
        queue: deque[Node] = deque()
        queued: set[Node] = set()
        for m, t in sorted(self._short):
            if dist.get(m, 0) > -1:
                dist[m], pred[m] = -1, ~t
                if m not in queued:
                    queued.add(m)
                    queue.append(m)
        relaxed = 0
        look_at = 2 * len(dist) + 8

        def lower(node: Node, value: int, via: Node) -> None:
            nonlocal relaxed
            dist[node], pred[node] = value, via
            relaxed += 1
            if node not in queued:
                queued.add(node)
                queue.append(node)

        topics = self._topics
        while queue:
            node = queue.popleft()
            queued.discard(node)
            d = dist[node]
            if node >= 0:
                self._expand_member(node, d, dist, lower)
            elif ~node >= topics:
                # a member at this count falls next and gives a partition: useful only if it can
                # give one at no cost (one it did not own), or if d <= -2
                k = ~node - topics
                givers = self.members if d <= -2 else sorted(m for m, n in self._loose_topics.items() if n)
                for m in givers:
                    if self.counts[m] == k and d < dist.get(m, 0):
                        lower(m, d, node)
            else:
                t = ~node
                short = self._short
                for m in self.subscribers[t]:
                    value = d - 1 if (m, t) in short else d
                    if value < dist.get(m, 0) and self._useful(m, value, dist):
                        lower(m, value, node)
            if relaxed >= look_at:
                look_at = relaxed + 2 * len(dist) + 8
                cycle = _cycle(pred)
                if cycle is not None:
                    return cycle
        return _cycle(pred)

    def _useful(self, m: int, value: int, dist: dict[Node, int]) -> bool:
        """Whether member ``m`` at distance ``value`` can lower another node: a topic it gives at
        no cost, any topic when ``value <= -2``, or the node of the count above its own."""
        if value <= -2 or self._loose_topics.get(m, 0) > 0:
            return True
        return value < dist.get(self.level(self.counts[m] + 1), 0)

    def _expand_member(self, m: int, d: int, dist: dict[Node, int], lower: _Lower) -> None:
        loose = self._loose
        for t in self.member_topics[m]:
            if (m, t) in loose:
                value = d
            elif d <= -2 and self.held(m, t) > 0:
                value = d + 1
            else:
                continue
            if value < dist.get(~t, 0):
                lower(~t, value, m)
        up = self.level(self.counts[m] + 1)
        if d < dist.get(up, 0):
            lower(up, d, m)

    def cancel(self, cycle: Sequence[Node]) -> None:
        """Push one partition around ``cycle`` (nodes in edge order)."""
        size = len(cycle)
        topics = self._topics
        rise: list[int] = []
        fall: list[int] = []
        for k, node in enumerate(cycle):
            after = cycle[(k + 1) % size]
            if node >= 0 and ~after >= topics:
                rise.append(node)
            elif node < 0 and ~node >= topics:
                fall.append(after)
            elif node >= 0:  # member gives a partition of topic ~after
                self._shift(node, ~after, -1)
            elif after >= 0:  # member takes a partition of topic ~node
                self._shift(after, ~node, 1)
        for m in rise:
            self.counts[m] += 1
        for m in fall:
            self.counts[m] -= 1

    def _shift(self, m: int, t: int, delta: int) -> None:
        self._held[m, t] = self.held(m, t) + delta
        self._moved.setdefault(t, set()).add(m)
        self._classify(m, t)

    def rebuild(self) -> None:
        """Choose the partitions of every topic whose counts changed: each member keeps
        ``min(x, o)`` of those it owned (the ones it holds now first), then takes the rest of
        its ``x`` from the partitions left (the ones it holds now first), members in order."""
        owner, original = self.owner, self.original
        for t in sorted(self._moved):
            lo, hi = self.offsets[t], self.offsets[t + 1]
            numbers = range(lo, hi)
            members = sorted(set(owner[lo:hi]) | self._moved[t] | {m for m in original[lo:hi] if m >= 0})
            want = {m: self.held(m, t) for m in members}
            new = [-1] * (hi - lo)
            for m in members:
                mine = [n for n in numbers if original[n] == m]
                mine.sort(key=lambda n: (owner[n] != m, n))
                for n in mine[: want[m]]:
                    new[n - lo] = m
                    want[m] -= 1
            for m in members:
                for n in numbers:
                    if want[m] == 0:
                        break
                    if new[n - lo] < 0 and owner[n] == m:
                        new[n - lo] = m
                        want[m] -= 1
            free = deque(n for n in numbers if new[n - lo] < 0)
            for m in members:
                while want[m] > 0:
                    new[free.popleft() - lo] = m
                    want[m] -= 1
            owner[lo:hi] = new


def _cycle(pred: dict[Node, Node]) -> list[Node] | None:
    """A cycle of the predecessor graph (always a negative one), nodes in edge order."""
    walked: dict[Node, Node] = {}
    for start in pred:
        if start in walked:
            continue
        trail: list[Node] = []
        node: Node | None = start
        while node is not None and node not in walked:
            walked[node] = start
            trail.append(node)
            node = pred.get(node)
        if node is not None and walked[node] == start:
            loop = trail[trail.index(node) :]
            loop.reverse()
            return loop
    return None
