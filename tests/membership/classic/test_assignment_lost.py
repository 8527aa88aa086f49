"""``AssignmentChanged.lost``: partitions given up without a revocation are named in the
assignment change itself (KIP-429 ``on_partitions_lost``), so the driver's host learns it from
the one action that changes what it owns; revoked partitions are never named lost."""

from __future__ import annotations

from streamtasks.membership.classic import AssignmentChanged, MetadataUpdated, ResponseReceived
from streamtasks.protocol.classic_group import HeartbeatRequest, HeartbeatResponse
from streamtasks.protocol.errors import KafkaErrorCode
from tests.membership.classic.helpers import commit_ok, cooperative, eager, one, request, stable, tps


def test_fenced_member_names_every_owned_partition_lost() -> None:
    member = cooperative()
    stable(member, tps("t0 t1"))
    rid, _ = request(member.poll(1_000), HeartbeatRequest)
    response = HeartbeatResponse(error=KafkaErrorCode.UNKNOWN_MEMBER_ID)
    change = one(member.handle(ResponseReceived(request_id=rid, response=response), 1_001), AssignmentChanged)
    assert (change.removed, change.lost) == (tps("t0 t1"), tps("t0 t1"))


def test_partitions_gone_from_the_metadata_are_lost_and_the_rest_kept() -> None:
    member = cooperative()
    member.handle(MetadataUpdated(partitions_per_topic={"t": 2}), 0)
    stable(member, tps("t0 t1"))
    change = one(member.handle(MetadataUpdated(partitions_per_topic={"t": 1}), 10), AssignmentChanged)
    assert (change.owned, change.removed, change.lost) == (tps("t0"), tps("t1"), tps("t1"))


def test_revoked_partitions_are_not_lost() -> None:
    member = eager()
    stable(member, tps("t0"))
    member.enforce_rebalance("test")
    change = one(commit_ok(member, member.poll(1), now=2), AssignmentChanged)
    assert (change.removed, change.lost) == (tps("t0"), ())
