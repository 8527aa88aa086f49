"""End to end against a small fake coordinator: groups converge, cooperative members revoke only
what moves, and no partition is ever owned twice."""

from __future__ import annotations

import pytest

from assignors.partition.range import RangeAssignor
from assignors.partition.sticky import CooperativeStickyAssignor
from streamtasks.membership.classic import (
    ClassicMember,
    InvokeListener,
    Leave,
    ListenerKind,
    MemberState,
    MetadataUpdated,
)
from tests.membership.classic.fake_group import FakeGroup
from tests.membership.classic.helpers import config

METADATA = MetadataUpdated(partitions_per_topic={"t": 6})


def member(*assignors: object) -> ClassicMember:
    m = ClassicMember(config(assignors=assignors or (CooperativeStickyAssignor(),)))
    m.handle(METADATA, 0)
    return m


def revoked(group: FakeGroup, index: int) -> int:
    return sum(
        len(a.partitions)
        for i, a in group.log
        if i == index and isinstance(a, InvokeListener) and a.kind is ListenerKind.REVOKED
    )


def assert_converged(group: FakeGroup, live: list[int]) -> None:
    owners = group.owners()
    assert len(owners) == 6
    assert all(len(o) == 1 for o in owners.values())
    counts = sorted(len(group.members[i].owned_partitions) for i in live)
    assert counts[-1] - counts[0] <= 1
    assert all(group.members[i].state is MemberState.STABLE for i in live)


def test_cooperative_scale_out_revokes_only_what_moves() -> None:
    group = FakeGroup(members=[member()])
    group.run(2_000)
    assert len(group.members[0].owned_partitions) == 6
    group.members.append(member())
    group.run(4_000)
    group.members.append(member())
    group.run(6_000)
    assert_converged(group, [0, 1, 2])
    assert revoked(group, 0) == 4  # 6 -> 3 -> 2: only moved partitions are revoked
    assert group.max_overlap_checks > 0


def test_eager_scale_out_revokes_everything_each_time() -> None:
    group = FakeGroup(members=[member(RangeAssignor())])
    group.run(2_000)
    group.members.append(member(RangeAssignor()))
    group.run(4_000)
    assert_converged(group, [0, 1])
    assert revoked(group, 0) == 6


def test_cooperative_member_leaving_hands_partitions_over() -> None:
    group = FakeGroup(members=[member(), member(), member()])
    group.run(3_000)
    assert_converged(group, [0, 1, 2])
    group.queue.append((2, Leave(reason="scale in")))
    group.run(6_000)
    assert group.members[2].state is MemberState.CLOSED
    assert_converged(group, [0, 1])


@pytest.mark.parametrize("bounced_first", [True, False])
def test_upgrade_path_from_range_to_cooperative_sticky(bounced_first: bool) -> None:
    # KIP-429's second rolling bounce: one member already offers only cooperative_sticky
    old = [member(CooperativeStickyAssignor(), RangeAssignor()) for _ in range(2)]
    new = member(CooperativeStickyAssignor())
    group = FakeGroup(members=[new, *old] if bounced_first else [*old, new])
    group.run(5_000)
    assert group.protocol == "cooperative-sticky"
    assert_converged(group, [0, 1, 2])
