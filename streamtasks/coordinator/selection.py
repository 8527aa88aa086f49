"""Which assignor a group uses, and which member computes a client-side assignment.

The seed KIP's rule (its accepted wording): a client-side assignor if one is possible, that is
supported by every member; among several, the members' advertised precedence decides. Each
member votes for the first assignor in its own list that every member supports and the most
votes win, ties broken by name (Kafka's classic protocol selection, applied to the seed's
"respect the precedence defined by the members"). Otherwise a server-side assignor: the most
common one the members name (ties by name), or the first configured one when none names any.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from streamtasks.coordinator.records import MemberMetadataRecord
from streamtasks.protocol.consumer_group import ClientAssignor

__all__ = ["choose_member", "client_assignor_entry", "preferred_server_assignor", "select_client_assignor"]


def select_client_assignor(members: Iterable[MemberMetadataRecord]) -> str | None:
    """The client-side assignor every member supports, by the members' votes; None if none is."""
    lists: list[tuple[str, ...]] = []
    for member in members:
        names = tuple(a.name for a in member.client_assignors)
        if not names:
            return None
        lists.append(names)
    if not lists:
        return None
    common = set(lists[0]).intersection(*lists[1:])
    if not common:
        return None
    votes: Counter[str] = Counter()
    for names in lists:
        votes[next(n for n in names if n in common)] += 1
    return min(votes, key=lambda n: (-votes[n], n))


def preferred_server_assignor(members: Iterable[MemberMetadataRecord], configured: Sequence[str]) -> str:
    """The most common ``server_assignor`` (ties by name), else the first configured one."""
    counts = Counter(m.server_assignor for m in members if m.server_assignor)
    if not counts:
        return configured[0]
    return min(counts, key=lambda n: (-counts[n], n))


def client_assignor_entry(member: MemberMetadataRecord, name: str) -> ClientAssignor | None:
    for entry in member.client_assignors:
        if entry.name == name:
            return entry
    return None


def choose_member(
    candidates: Mapping[str, object] | Iterable[str],
    *,
    previous: str | None = None,
    skip_previous: bool = False,
) -> str | None:
    """The member asked to compute the assignment: the previous one while it is a candidate
    (unless ``skip_previous``: its deadline passed), else the next candidate after it in
    member-id order, wrapping around; the first in that order when there was none."""
    ordered = sorted(candidates)
    if not ordered:
        return None
    if previous is None:
        return ordered[0]
    if previous in ordered and not skip_previous:
        return previous
    after = [m for m in ordered if m > previous]
    return after[0] if after else ordered[0]
