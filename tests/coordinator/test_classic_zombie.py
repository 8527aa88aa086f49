"""A dynamic classic member the group removed while its JoinGroup went unanswered rejoins with
its old member id, still claiming its partitions: it is answered UNKNOWN_MEMBER_ID (it gives them
up as lost and joins afresh), not made a member again holding partitions that are another
member's by now. An unknown id claiming nothing is a new member (the id MEMBER_ID_REQUIRED
gave out, which the group does not remember). The simulator found the zombie: seed 97 of
``python -m streamtasks.sim --protocol mixed`` (docs/simulation.md)."""

from __future__ import annotations

from streamtasks.protocol.errors import KafkaErrorCode
from tests.coordinator.classic_support import ClassicHarness


def _removed_member_with_partitions() -> tuple[ClassicHarness, str, int]:
    """``a`` and ``b`` share foo; ``a`` goes silent until its session expires."""
    h = ClassicHarness()
    h.add("a")
    h.add("b")
    h.cjoin("a")
    h.cjoin("b")
    h.settle_all()
    a = h.classic["a"]
    assert a.owned, "a owns partitions before it goes silent"
    gone, owned = a.member_id, len(a.owned)
    for _ in range(3):  # b heartbeats, a is silent; a's session is 10 s
        h.advance(4_000)
        h.step("b")
    assert h.group.member(gone) is None
    return h, gone, owned


def test_a_removed_member_rejoining_with_what_it_owned_is_unknown() -> None:
    h, gone, owned = _removed_member_with_partitions()
    a = h.classic["a"]
    # the zombie still believes it is that member and owns them
    assert a.member_id == gone
    assert len(a.owned) == owned
    response = h.cjoin("a")
    assert response is not None
    assert a.history[-1].error is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert h.group.member(gone) is None  # not re-created
    assert not a.owned  # it gave its partitions up as lost
    # it then joins afresh and the group settles with no partition owned twice
    h.settle_all()
    h.check_owners()
    assert a.member_id not in ("", gone)
    assert h.group.member(a.member_id) is not None


def test_an_unknown_member_id_claiming_nothing_is_a_new_member() -> None:
    h, gone, _ = _removed_member_with_partitions()
    a = h.classic["a"]
    a.owned = frozenset()  # an eager member revokes everything before it rejoins
    response = h.cjoin("a")
    assert h.group.member(gone) is not None  # the id is taken as a new member's
    assert response is None or response.error is KafkaErrorCode.NONE
    h.settle_all()
    h.check_owners()
