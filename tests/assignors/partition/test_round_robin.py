from __future__ import annotations

from hypothesis import given

from assignors.partition.round_robin import RoundRobinAssignor
from assignors.partition.types import GroupSubscription, RebalanceProtocol
from tests.assignors.partition import kafka_python
from tests.assignors.partition.groups import check_complete, group, groups, homogeneous_groups, spread
from topology.ids import TopicPartition


def test_declares_eager_only_and_a_version() -> None:
    assert RoundRobinAssignor().supported_protocols() == (RebalanceProtocol.EAGER,)
    assert (RoundRobinAssignor.name, RoundRobinAssignor.version) == ("roundrobin", 0)  # Kafka's wire name


def test_deals_partitions_in_turn() -> None:
    g = group({"c0": ["t0", "t1"], "c1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    result = RoundRobinAssignor().assign(g)
    tp = TopicPartition
    assert result.members == {
        "c0": (tp("t0", 0), tp("t0", 2), tp("t1", 1)),
        "c1": (tp("t0", 1), tp("t1", 0), tp("t1", 2)),
    }


def test_skips_members_not_subscribed_like_kafka() -> None:
    # Kafka's documented example: C0 -> t0; C1 -> t0, t1; C2 -> t0, t1, t2.
    g = group({"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}, {"t0": 1, "t1": 2, "t2": 3})
    result = RoundRobinAssignor().assign(g)
    tp = TopicPartition
    assert result.members == {
        "C0": (tp("t0", 0),),
        "C1": (tp("t1", 0),),
        "C2": (tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)),
    }


@given(homogeneous_groups())
def test_identical_subscriptions_are_balanced(g: GroupSubscription) -> None:
    result = RoundRobinAssignor().assign(g)
    check_complete(g, result)
    assert spread(result) <= 1


@given(homogeneous_groups())
def test_matches_kafka_python(g: GroupSubscription) -> None:
    # kafka-python 3's round robin breaks (KeyError) when subscriptions differ, so the peer
    # comparison is for identical subscriptions; the general case is checked against Kafka's
    # description below.
    result = RoundRobinAssignor().assign(g)
    assert dict(result.members) == kafka_python.run(kafka_python.RoundRobinPartitionAssignor, g)


def kafka_round_robin(g: GroupSubscription) -> dict[str, tuple[TopicPartition, ...]]:
    """Kafka's RoundRobinAssignor as its javadoc describes it, written plainly."""
    members = sorted(g.members)
    topics = sorted({t for s in g.members.values() for t in s.topics})
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    turn = 0
    for topic in topics:
        for p in range(g.partitions_per_topic[topic]):
            while topic not in g.members[members[turn % len(members)]].topics:
                turn += 1
            out[members[turn % len(members)]].append(TopicPartition(topic, p))
            turn += 1
    return {m: tuple(tps) for m, tps in out.items()}


@given(groups())
def test_matches_kafkas_description_for_any_subscriptions(g: GroupSubscription) -> None:
    result = RoundRobinAssignor().assign(g)
    check_complete(g, result)
    assert dict(result.members) == kafka_round_robin(g)
