"""The classic SyncGroup step (``SyncApply``): the request after a JoinGroup answer, the
assignment an answer carries, and applying it through what the member owns."""

from __future__ import annotations

from streamtasks.membership.classic.followup import Applied, FollowUp
from streamtasks.membership.classic.metrics import RebalanceMetrics
from streamtasks.membership.classic.records import Link, Membership, Ownership
from streamtasks.membership.classic.sync_apply import SyncApply
from streamtasks.membership.common import (
    AssignmentChanged,
    CoordinatorLink,
    Holdings,
    InvokeListener,
    ListenerKind,
)
from streamtasks.protocol.classic_group import JoinGroupResponse, SyncGroupResponse
from streamtasks.protocol.errors import KafkaErrorCode as E
from tests.membership.classic.helpers import assignment_bytes, config, tps
from tests.membership.common.test_kernel import kernel


def _sync(now_ms: int = 0) -> tuple[SyncApply, Holdings[Ownership], CoordinatorLink[Link]]:
    cfg = config()
    k = kernel()
    held = Holdings(k, Ownership(owned=frozenset(tps("t0 t1")), owned_generation=1), -1)
    link = CoordinatorLink(Link.starting(now_ms), cfg, k)
    return SyncApply(cfg, held, FollowUp(cfg), link, RebalanceMetrics(created_ms=now_ms)), held, link


def test_a_follower_sends_syncgroup_without_assignments() -> None:
    sync, _, _ = _sync()
    joined = JoinGroupResponse(
        error=E.NONE, generation_id=2, protocol_name="cooperative-sticky", leader="a", member_id="b"
    )
    request, problems = sync.request(Membership(member_id="b", generation=2, leader_id="a"), None, joined)
    assert (request.generation_id, request.member_id, request.assignments, problems) == (2, "b", (), ())


def test_an_answer_is_read_into_partitions_and_user_data_and_counts_as_heard() -> None:
    sync, _, link = _sync()
    answer = SyncGroupResponse(
        error=E.NONE,
        protocol_type="consumer",
        protocol_name="cooperative-sticky",
        assignment=assignment_bytes(tps("t1 t2")),
    )
    m = Membership(member_id="b", generation=2, protocol_name="cooperative-sticky")
    assert sync.read(answer, m, ("t",), 500) == (frozenset(tps("t1 t2")), b"")
    assert link.record.hb_last_ok_ms == 500
    wrong = SyncGroupResponse(error=E.NONE, protocol_type="consumer", protocol_name="range", assignment=b"")
    assert isinstance(sync.read(wrong, m, ("t",), 600), str)
    assert link.record.hb_last_ok_ms == 500  # an unusable answer is no news of the coordinator


def test_applying_keeps_the_sticky_memory_and_emits_in_listener_order() -> None:
    sync, held, _ = _sync()
    m = Membership(member_id="b", generation=2)
    then = sync.apply(
        frozenset(tps("t1 t2")), frozenset(tps("t0")), 100, user_data=b"ud", membership=m, metadata=None
    )
    assert isinstance(then, Applied)
    assert held.record == Ownership(
        owned=frozenset(tps("t1 t2")),
        owned_generation=2,
        user_data=b"ud",
        previous=tps("t1 t2"),
        previous_generation=2,
    )
    actions = list(held._k.flush())  # type: ignore[attr-defined]
    assert [type(a) for a in actions] == [InvokeListener, AssignmentChanged, InvokeListener]
    assert [a.kind for a in actions if isinstance(a, InvokeListener)] == [
        ListenerKind.REVOKED,
        ListenerKind.ASSIGNED,
    ]
