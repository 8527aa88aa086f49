"""The Kafka Streams <-> streamtasks drills are registered and refused with their reason until
``App(group_protocol="streams")`` exists; the word count's names and declared topology (the
live checks are in test_kafka_streams_peer.py)."""

from __future__ import annotations

import pytest

from streamtasks.cli import main
from streamtasks.drills.catalog import get_drill
from streamtasks.drills.kafka_streams_peer import WordCountNames, word_count_topology

DRILLS = ("kafka-streams-to-streamtasks", "streamtasks-to-kafka-streams")


@pytest.mark.parametrize("name", DRILLS)
def test_the_drill_is_listed_and_refused_with_its_reason(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = get_drill(name)
    assert not spec.available
    assert main(["drill", "list"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.startswith(name)]
    assert len(listed) == 1
    assert "unavailable: needs the mixed Java + App word count" in listed[0]
    assert main(["drill", "run", name, "--bootstrap-servers", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert f"drill '{name}' is not available: needs the mixed Java + App word count" in err


def test_word_count_names_are_kafka_streams_derivations() -> None:
    names = WordCountNames(application_id="wc", input_topic="words", output_topic="counts")
    assert names.changelog_topic == "wc-word-counts-changelog"
    assert names.repartition_topic == "wc-words-by-word-repartition"
    topology = word_count_topology(names)
    assert topology.epoch == 0
    source, count = topology.subtopologies
    assert (source.subtopology_id, source.source_topics, source.repartition_sink_topics) == (
        "0",
        ("words",),
        ("wc-words-by-word-repartition",),
    )
    assert [t.name for t in count.repartition_source_topics] == ["wc-words-by-word-repartition"]
    assert [t.name for t in count.state_changelog_topics] == ["wc-word-counts-changelog"]
    # Kafka Streams declares no partition counts (the broker derives them) and its default
    # replication factor -1 (the broker's default)
    assert {
        (t.partitions, t.replication_factor)
        for t in (*count.repartition_source_topics, *count.state_changelog_topics)
    } == {(0, -1)}
