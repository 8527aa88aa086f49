"""Version probing, leader and member side, and convergence over rounds."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.errors import (
    AssignorInputError,
    DecodeError,
    RemoteProtocolError,
    UnsupportedVersionError,
)
from streamtasks.protocol import (
    LATEST_VERSION,
    UNKNOWN_METADATA_VERSION,
    MemberVersionUpdate,
    SubscriptionInfo,
    encode_subscription_info,
    metadata_version,
    negotiate,
    on_assignment_version,
)


def test_everyone_on_the_latest_version() -> None:
    d = negotiate({"a": (3, 3), "b": (3, 3)})
    assert (d.used_version, d.common_latest) == (3, 3)
    assert not d.followup_needed
    assert not d.version_probing


def test_new_leader_with_old_members_encodes_at_the_oldest_version() -> None:
    d = negotiate({"new": (3, 3), "old": (1, 1)})
    assert (d.used_version, d.common_latest, d.min_received_version) == (1, 1, 1)
    assert not d.followup_needed  # the new member downgrades itself after this round


def test_old_leader_with_a_future_member_is_version_probing() -> None:
    d = negotiate({"old": (2, 2), "new": (3, 3)}, my_latest=2)
    assert d.future_members == ("new",)
    assert d.is_future("new")
    assert not d.is_future("old")
    assert (d.used_version, d.common_latest) == (2, 2)
    assert d.version_probing
    assert d.followup_needed


def test_only_future_members_get_the_leaders_latest() -> None:
    d = negotiate({"x": (5, 5), "y": (4, 6)}, my_latest=3)
    assert (d.used_version, d.common_latest) == (3, 3)
    assert d.future_members == ("x", "y")


def test_end_of_rolling_upgrade_asks_for_an_upgrade_round() -> None:
    # Every member was pinned to v1 by upgrade_from but all of them now support v3.
    d = negotiate({"a": (1, 3), "b": (1, 3)})
    assert (d.used_version, d.common_latest) == (1, 3)
    assert d.upgrade_pending
    assert d.followup_needed
    assert d.outdated_members == ("a", "b")


def test_too_old_subscription_names_the_member() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"member 'ancient' sent .* version 1"):
        negotiate({"fine": (3, 3), "ancient": (1, 1)}, min_supported=2)
    with pytest.raises(UnsupportedVersionError):
        negotiate({"stuck": (1, 1)}, my_latest=3, min_supported=2)


def test_bad_inputs() -> None:
    with pytest.raises(AssignorInputError):
        negotiate({})
    with pytest.raises(RemoteProtocolError, match="latest supported"):
        negotiate({"liar": (3, 2)})
    with pytest.raises(AssignorInputError):
        negotiate({"a": (1, 1)}, my_latest=2, min_supported=3)


@pytest.mark.parametrize(
    ("used", "received", "common", "expected"),
    [
        (3, 3, 3, MemberVersionUpdate(new_used_version=3, enforce_rebalance=False)),
        (3, 2, 2, MemberVersionUpdate(new_used_version=2, enforce_rebalance=True)),  # downgrade
        (1, 1, 3, MemberVersionUpdate(new_used_version=3, enforce_rebalance=True)),  # upgrade
        (3, 1, 3, MemberVersionUpdate(new_used_version=3, enforce_rebalance=False)),  # others move
        (2, 1, 3, MemberVersionUpdate(new_used_version=3, enforce_rebalance=True)),
        (1, 1, 1, MemberVersionUpdate(new_used_version=1, enforce_rebalance=False)),
    ],
)
def test_member_moves_to_the_commonly_supported_version(
    used: int, received: int, common: int, expected: MemberVersionUpdate
) -> None:
    assert on_assignment_version(used, received, common) == expected


def test_member_rejects_a_leader_that_broke_the_rules() -> None:
    with pytest.raises(RemoteProtocolError, match="got a version 3 assignment"):
        on_assignment_version(2, 3, 3)
    with pytest.raises(RemoteProtocolError, match="supports up to 3"):
        on_assignment_version(3, 3, 4)
    with pytest.raises(RemoteProtocolError, match="above its commonly supported"):
        on_assignment_version(3, 3, 2)


@given(
    members=st.lists(
        st.integers(1, 5).flatmap(lambda latest: st.tuples(st.integers(1, latest), st.just(latest))),
        min_size=1,
        max_size=6,
    ),
    leader_index=st.integers(0, 5),
)
def test_group_converges_to_the_lowest_latest_version_in_one_followup(
    members: list[tuple[int, int]], leader_index: int
) -> None:
    """Members on code of different ages (latest 1..5), some pinned lower by upgrade_from; the
    leader is one of them. After one follow-up rebalance everyone speaks min(latest)."""
    used = {f"m{i}": u for i, (u, _) in enumerate(members)}
    latest = {f"m{i}": lt for i, (_, lt) in enumerate(members)}
    leader = f"m{leader_index % len(members)}"
    target = min(latest.values())
    rounds = 0
    for _ in range(3):
        rounds += 1
        decision = negotiate({m: (used[m], latest[m]) for m in used}, my_latest=latest[leader])
        updates = {
            m: on_assignment_version(used[m], decision.used_version, decision.common_latest, latest[m])
            for m in used
        }
        used = {m: u.new_used_version for m, u in updates.items()}
        if not any(u.enforce_rebalance for u in updates.values()) and not decision.followup_needed:
            break
    else:  # pragma: no cover - the assertion below explains
        pytest.fail("no convergence within three rounds")
    assert rounds <= 2  # the first rebalance and at most one follow-up
    assert set(used.values()) == {target}


def test_kip848_minus_one_means_read_the_header() -> None:
    data = encode_subscription_info(SubscriptionInfo(process_id=uuid.UUID(int=5)), 2)
    assert metadata_version(UNKNOWN_METADATA_VERSION, data) == 2
    assert metadata_version(2, data) == 2
    with pytest.raises(DecodeError, match="declares version 3"):
        metadata_version(3, data)
    assert LATEST_VERSION == 3
