from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.errors import CopartitionError, TopologyError
from topology import (
    RepartitionTopic,
    StateStore,
    Subtopology,
    TaskId,
    TopicPartition,
    Topology,
    TopologyBuilder,
)


def wordcount() -> Topology:
    b = TopologyBuilder("wordcount")
    b.stream("text-lines").repartition("words").store("counts")
    return b.build()


def test_tasks_carry_source_and_changelog_partitions() -> None:
    tasks = wordcount().tasks({"text-lines": 3})
    assert [t.id for t in tasks] == [TaskId(s, p) for s in (0, 1) for p in range(3)]
    first, counting = tasks[0], tasks[4]
    assert first.source_partitions == (TopicPartition("text-lines", 0),)
    assert first.changelog_partitions == ()
    assert not first.is_stateful
    assert counting.source_partitions == (TopicPartition("wordcount-words-repartition", 1),)
    assert counting.changelog_partitions == (TopicPartition("wordcount-counts-changelog", 1),)
    assert counting.is_stateful
    assert counting.store_names == ("counts",)


def test_changelog_topic_name_follows_kafka_streams() -> None:
    assert StateStore(name="counts").changelog_topic("app") == "app-counts-changelog"


def test_unlogged_store_is_stateful_without_changelog() -> None:
    b = TopologyBuilder("app")
    b.stream("in").store("cache", logging=False)
    (task,) = b.build().tasks({"in": 1})
    assert task.is_stateful
    assert task.changelog_partitions == ()
    assert b.build().internal_topics() == ()


def test_partition_counts_derive_internal_topics() -> None:
    counts = wordcount().partition_counts({"text-lines": 6})
    assert counts == {
        "text-lines": 6,
        "wordcount-words-repartition": 6,
        "wordcount-counts-changelog": 6,
    }


def test_explicit_repartition_count_wins_and_sets_downstream_tasks() -> None:
    b = TopologyBuilder("app")
    b.stream("in").repartition("by-user", partitions=4).store("profiles")
    topo = b.build()
    assert topo.partition_counts({"in": 12})["app-by-user-repartition"] == 4
    assert [t.id for t in topo.tasks({"in": 12}) if t.id.subtopology == 1] == [TaskId(1, p) for p in range(4)]


def test_derived_repartition_count_is_max_of_writers_inputs() -> None:
    # Two repartitions in a chain: the second derives from the first.
    b = TopologyBuilder("app")
    b.stream("a", "b").repartition("first").repartition("second").store("s")
    counts = b.build().partition_counts({"a": 5, "b": 5})
    assert counts["app-first-repartition"] == 5
    assert counts["app-second-repartition"] == 5


def test_not_copartitioned_sources_name_topics_and_counts() -> None:
    b = TopologyBuilder("app")
    b.stream("orders", "payments").store("joined")
    with pytest.raises(CopartitionError) as err:
        b.build().tasks({"orders": 6, "payments": 4})
    message = str(err.value)
    assert "orders=6" in message
    assert "payments=4" in message
    assert "subtopology 0" in message


def test_missing_partition_count_is_a_clear_error() -> None:
    with pytest.raises(TopologyError, match="no partition count for source topic 'text-lines'"):
        wordcount().tasks({"other": 3})


def test_zero_partitions_rejected() -> None:
    with pytest.raises(TopologyError, match="need at least 1"):
        wordcount().tasks({"text-lines": 0})


def test_topic_may_feed_only_one_subtopology() -> None:
    b = TopologyBuilder("app")
    b.stream("in")
    b.stream("in")
    with pytest.raises(TopologyError, match="source of subtopologies 0 and 1"):
        b.build()


def test_duplicate_store_names_rejected() -> None:
    b = TopologyBuilder("app")
    b.stream("a").store("s")
    b.stream("b").store("s")
    with pytest.raises(TopologyError, match="state store 's'"):
        b.build()


def test_undeclared_repartition_topic_rejected() -> None:
    with pytest.raises(TopologyError, match="undeclared repartition topic"):
        Topology(
            application_id="app",
            subtopologies=(Subtopology(id=0, sources=("a",), repartition_sinks=("nope",)),),
        )


def test_repartition_cycle_without_counts_rejected() -> None:
    topo = Topology(
        application_id="app",
        subtopologies=(
            Subtopology(id=0, repartition_sources=("x",), repartition_sinks=("y",)),
            Subtopology(id=1, repartition_sources=("y",), repartition_sinks=("x",)),
        ),
        repartition_topics=(RepartitionTopic(name="x"), RepartitionTopic(name="y")),
    )
    with pytest.raises(TopologyError, match="cycle"):
        topo.partition_counts({})


def test_application_id_must_be_a_single_word() -> None:
    with pytest.raises(TopologyError, match="application_id"):
        TopologyBuilder("my app").build()


def test_task_for_maps_partitions_to_tasks() -> None:
    topo = wordcount()
    assert topo.task_for(TopicPartition("text-lines", 2)) == TaskId(0, 2)
    assert topo.task_for(TopicPartition("wordcount-words-repartition", 5)) == TaskId(1, 5)
    with pytest.raises(TopologyError):
        topo.task_for(TopicPartition("unknown", 0))


def test_subscribed_topics_include_repartition_topics() -> None:
    assert wordcount().subscribed_topics() == ("text-lines", "wordcount-words-repartition")


def test_fingerprint_is_known_bytes() -> None:
    # Pinned: the fingerprint is part of the wire format, so it must not drift between releases.
    assert wordcount().fingerprint().hex() == "032f5e7daf28a1a7152e2bed89e3f2e5"
    assert len(wordcount().fingerprint()) == 16


def test_fingerprint_ignores_declaration_order_but_not_content() -> None:
    a = Topology(
        application_id="app",
        subtopologies=(
            Subtopology(id=0, sources=("x", "y"), stores=(StateStore(name="s1"), StateStore(name="s2"))),
        ),
    )
    b = Topology(
        application_id="app",
        subtopologies=(
            Subtopology(id=0, sources=("y", "x"), stores=(StateStore(name="s2"), StateStore(name="s1"))),
        ),
    )
    c = Topology(
        application_id="app",
        subtopologies=(
            Subtopology(
                id=0, sources=("x", "y"), stores=(StateStore(name="s1"), StateStore(name="s2", logging=False))
            ),
        ),
    )
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != c.fingerprint()


@given(
    st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=5, unique=True),
    st.integers(1, 64),
)
def test_every_partition_maps_to_exactly_one_task(topics: list[str], partitions: int) -> None:
    b = TopologyBuilder("app")
    for t in topics:
        b.stream(t).store(f"store-{t}")
    topo = b.build()
    tasks = topo.tasks(dict.fromkeys(topics, partitions))
    seen = [tp for task in tasks for tp in task.source_partitions]
    assert sorted(seen) == sorted(TopicPartition(t, p) for t in topics for p in range(partitions))
    assert len({t.id for t in tasks}) == len(topics) * partitions
    for task in tasks:
        assert all(topo.task_for(tp) == task.id for tp in task.source_partitions)
