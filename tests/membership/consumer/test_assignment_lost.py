"""``AssignmentChanged.lost`` from the KIP-848 member: partitions given up without a revocation
(fenced, metadata gone) are named in the assignment change; revoked ones never are."""

from __future__ import annotations

from streamtasks.membership.classic import AssignmentChanged
from streamtasks.membership.consumer import MemberState
from tests.membership.consumer.helpers import Cluster


def _changes(c: Cluster, name: str) -> list[AssignmentChanged]:
    return [a for a in c.nodes[name].actions if isinstance(a, AssignmentChanged)]


def test_a_member_without_heartbeat_answers_names_what_it_owned_lost() -> None:
    c = Cluster()
    c.add("a")
    c.run(2_000)
    owned = tuple(sorted(c.owned("a")))
    assert owned
    c.nodes["a"].hold = True
    c.run(10_200)
    last = _changes(c, "a")[-1]
    assert (last.owned, last.removed, last.lost) == ((), owned, owned)


def test_revoked_partitions_are_not_lost() -> None:
    c = Cluster()
    c.add("a")
    c.run(2_000)
    c.add("b")
    c.run(3_000)
    assert {n.member.state for n in c.nodes.values()} == {MemberState.STABLE}
    revoking = [ch for ch in _changes(c, "a") if ch.removed]
    assert revoking
    assert all(ch.lost == () for ch in revoking)
