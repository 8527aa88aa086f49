"""faust actives and standbys placed by the high-availability task assignor (KIP-441)."""

from __future__ import annotations

from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import AssignmentConfigs
from streamtasks.streams.faust_placement import FaustMemberState, FaustPlacement, place_faust
from topology.ids import TopicPartition

SOURCE = "clicks"
CHANGELOG = "fx-counts-changelog"
LEADER = "fx-__assignor-__leader"
TOPICS = (SOURCE, CHANGELOG, LEADER)
COUNTS = {SOURCE: 4, CHANGELOG: 4, LEADER: 1}
END = 10_000


def place(members: dict[str, FaustMemberState], *, standbys: int = 1, lag: int = 100) -> FaustPlacement:
    return place_faust(
        members,
        COUNTS,
        changelog_topics=frozenset({CHANGELOG}),
        task_assignor=HighAvailabilityTaskAssignor(),
        configs=AssignmentConfigs(num_standby_replicas=standbys, acceptable_recovery_lag=lag),
        now_ms=1_000,
    )


def ends() -> dict[TopicPartition, int]:
    return {TopicPartition(CHANGELOG, p): END for p in range(4)}


def caught_up() -> dict[TopicPartition, int]:
    return {TopicPartition(CHANGELOG, p): END - 1 for p in range(4)}


def actives(result: FaustPlacement, member: str) -> set[int]:
    return set(result.members[member].actives[SOURCE])


def test_fresh_group_splits_actives_and_places_standbys_elsewhere() -> None:
    result = place({m: FaustMemberState(topics=TOPICS, url=f"http://{m}/") for m in ("a", "b")})
    assert result.problems == ()
    assert actives(result, "a") | actives(result, "b") == {0, 1, 2, 3}
    assert not actives(result, "a") & actives(result, "b")
    for m in ("a", "b"):
        out = result.members[m]
        assert set(out.standbys[CHANGELOG]).isdisjoint(out.actives[CHANGELOG])
        assert out.actives[SOURCE] == out.actives[CHANGELOG]  # the set's topics move together
    # Every stateful task has its one standby; the leader topic's task is stateless (no standby).
    assert sorted(p for m in ("a", "b") for p in result.members[m].standbys[CHANGELOG]) == [0, 1, 2, 3]
    assert all(result.members[m].standbys[LEADER] == () for m in ("a", "b"))
    assert result.topic_groups == {LEADER: 0, SOURCE: 1, CHANGELOG: 1}


def test_a_new_member_without_state_warms_up_before_taking_actives() -> None:
    a = FaustMemberState(
        topics=TOPICS,
        url="http://a/",
        actives={SOURCE: (0, 1, 2, 3), CHANGELOG: (0, 1, 2, 3), LEADER: (0,)},
        offsets=caught_up(),
        highwaters=ends(),
    )
    b = FaustMemberState(topics=TOPICS, url="http://b/")
    result = place({"a": a, "b": b}, standbys=0)
    assert actives(result, "a") == {0, 1, 2, 3}  # nothing moves to a member that is not caught up
    assert result.warmups["b"]  # b warms some of them up ...
    assert set(result.members["b"].standbys[CHANGELOG]) == {tp.partition for tp in result.warmups["b"]}
    assert result.followup_rebalance_ms is not None  # ... and the group comes back for them


def test_once_caught_up_the_warm_member_takes_its_share() -> None:
    a = FaustMemberState(
        topics=TOPICS,
        url="http://a/",
        actives={SOURCE: (0, 1, 2, 3), CHANGELOG: (0, 1, 2, 3), LEADER: (0,)},
        offsets=caught_up(),
        highwaters=ends(),
    )
    b = FaustMemberState(
        topics=TOPICS,
        url="http://b/",
        standbys={SOURCE: (2, 3), CHANGELOG: (2, 3)},
        offsets={TopicPartition(CHANGELOG, p): END - 5 for p in (2, 3)},
        highwaters=ends(),
    )
    result = place({"a": a, "b": b}, standbys=0)
    assert actives(result, "b") == {2, 3}
    assert actives(result, "a") == {0, 1}
    assert result.warmups == {"a": (), "b": ()}


def test_different_subscriptions_fall_back_to_faust_placement() -> None:
    result = place(
        {
            "a": FaustMemberState(topics=TOPICS, url="http://a/"),
            "b": FaustMemberState(topics=(SOURCE,), url="http://b/"),
        }
    )
    assert result.problems
    assert "different topics" in result.problems[0]
    assert actives(result, "a") | actives(result, "b") == {0, 1, 2, 3}


def test_shared_url_falls_back_and_says_so() -> None:
    result = place({m: FaustMemberState(topics=TOPICS, url="http://same/") for m in ("a", "b")})
    assert any("share the url" in p for p in result.problems)
