"""The Kafka Streams <-> streamtasks drills are listed and runnable (the live runs:
tests/drills/test_mixed_streams.py runs their code on a script of both kinds); options that
belong to other drills are refused; the word count's names and declared topology (the live
checks are in test_kafka_streams_peer.py)."""

from __future__ import annotations

import pytest

from streamtasks.cli import main
from streamtasks.drills.catalog import get_drill
from streamtasks.drills.kafka_streams_peer import WordCountNames, word_count_topology
from streamtasks.drills.mixed_streams import SCRIPTS

DRILLS = ("kafka-streams-to-streamtasks", "streamtasks-to-kafka-streams")


@pytest.mark.parametrize("name", DRILLS)
def test_the_drill_is_listed_and_runs_a_script(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    spec = get_drill(name)
    assert spec.available
    assert spec.worker == "mixed"
    assert main(["drill", "list"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.startswith(name)]
    assert len(listed) == 1
    assert "unavailable" not in listed[0]
    script = SCRIPTS[name]
    started = [n for action, names in script if action == "start" for n in names.split()]
    first, last = ("java-", "py-") if name == "kafka-streams-to-streamtasks" else ("py-", "java-")
    assert started[0].startswith(first)
    assert started[-1].startswith(last)


@pytest.mark.parametrize("option", [["--simulate"], ["--coordinator"], ["--protocol", "consumer"]])
def test_options_of_other_drills_are_refused(option: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["drill", "run", DRILLS[0], "--bootstrap-servers", "127.0.0.1:1", *option])
    assert code == 2
    assert f"it takes no {option[0]}" in capsys.readouterr().err


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
