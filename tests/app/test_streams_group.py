"""The App's topology as a streams-group member declares it, and its streams settings."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from streamtasks.app.config import make_app_config
from streamtasks.app.streams_group import StreamsWiring, declared_topology, user_endpoint
from streamtasks.drills.kafka_streams_peer import WordCountNames, word_count_topology
from streamtasks.errors import ConfigError
from streamtasks.membership.streams import EndpointsChanged, StreamsMemberConfig
from streamtasks.protocol.streams_group import (
    CopartitionGroup,
    Endpoint,
    EndpointToPartitions,
    KeyValue,
    TaskOffset,
    TopicPartitions,
)
from streamtasks.protocol.streams_group import Topology as Declared
from streamtasks.streams.hosts import EndpointPartitionsHosts, TaskHosts
from topology import TopologyBuilder
from topology.ids import TaskId, TopicPartition
from topology.model import RepartitionTopic, StateStore, Subtopology, Topology


def wordcount() -> Topology:
    builder = TopologyBuilder("wordcount")
    builder.stream("text-lines").repartition("words").store("counts")
    return builder.build()


def test_the_wordcount_is_declared_as_kafka_streams_declares_it() -> None:
    """Kafka Streams 4.4's word count (java/streams, as read back from the broker) and the App's
    with the same names declare equal topologies: the broker requires it of a group's members."""
    names = WordCountNames(application_id="wordcount", input_topic="text-lines", output_topic="out")
    names = dataclasses.replace(names, store="counts", grouping="words")
    declared = declared_topology(wordcount())
    assert declared == word_count_topology(names)
    first, second = declared.subtopologies
    assert (first.subtopology_id, second.subtopology_id) == ("0", "1")
    (changelog,) = second.state_changelog_topics
    assert changelog.topic_configs == (
        KeyValue(key="cleanup.policy", value="compact"),
        KeyValue(key="message.timestamp.type", value="CreateTime"),
    )
    assert (changelog.partitions, changelog.replication_factor) == (0, -1)
    assert first.copartition_groups == second.copartition_groups == ()


def test_a_join_declares_its_sources_copartitioned_and_fixed_counts_and_window_configs() -> None:
    topology = Topology(
        application_id="app",
        subtopologies=(
            Subtopology(id=0, sources=("a",), repartition_sinks=("re",)),
            Subtopology(
                id=1,
                sources=("b", "c"),
                repartition_sources=("re",),
                stores=(
                    StateStore(name="w", kind="window", window_size_ms=1000, retention_ms=5000),
                    StateStore(name="plain", logging=False),
                ),
            ),
        ),
        repartition_topics=(RepartitionTopic(name="re", partitions=3),),
    )
    declared = declared_topology(topology, replication_factor=3)
    join = declared.subtopologies[1]
    (repartition,) = join.repartition_source_topics
    assert (repartition.name, repartition.partitions, repartition.replication_factor) == (
        "app-re-repartition",
        3,
        3,
    )
    assert dict((kv.key, kv.value) for kv in repartition.topic_configs)["cleanup.policy"] == "delete"
    assert join.copartition_groups == (
        CopartitionGroup(source_topics=(0, 1), repartition_source_topics=(0,)),
    )
    (changelog,) = join.state_changelog_topics  # the unlogged store has none
    assert changelog.name == "app-w-changelog"
    assert changelog.replication_factor == 3
    assert dict((kv.key, kv.value) for kv in changelog.topic_configs)["cleanup.policy"] == "compact,delete"


def _wiring(process: uuid.UUID | None) -> StreamsWiring:
    def config(topology: Declared, member_id: str) -> StreamsMemberConfig:
        return StreamsMemberConfig(
            group_id="wordcount", member_id=member_id, process_id="", topology=topology
        )

    async def nothing() -> None:
        return None

    changelog = {TaskId(1, 0): (TopicPartition("wordcount-counts-changelog", 0),)}
    return StreamsWiring(
        wordcount(),
        config=config,
        replication_factor=-1,
        process_id=lambda: process,
        offset_sums=lambda: {TaskId(1, 0): 12, TaskId(1, 1): 5},
        changelogs_of=lambda tid: changelog.get(tid, ()),
        end_offsets=lambda: {TopicPartition("wordcount-counts-changelog", 0): 20},
        create_topics=nothing,
    )


def test_the_member_keeps_its_id_and_takes_the_state_directorys_process_id() -> None:
    process = uuid.uuid4()
    wiring = _wiring(process)
    first, again = wiring.member(), wiring.member()
    assert first.member_id == again.member_id
    assert first.config.process_id == str(process)
    assert first.config.topology == wiring.topology
    assert first.config.topics == ("text-lines", "wordcount-words-repartition")
    assert _wiring(None).member().config.process_id  # before the directory is read: a random one


def test_task_offsets_carry_the_offset_sums_and_the_end_offsets_known() -> None:
    update = _wiring(None).task_offsets()
    assert update.task_offsets == (
        TaskOffset(subtopology_id="1", partition=0, offset=12),
        TaskOffset(subtopology_id="1", partition=1, offset=5),
    )
    assert update.task_end_offsets == (TaskOffset(subtopology_id="1", partition=0, offset=20),)


def test_streams_is_a_group_protocol_of_the_app() -> None:
    cfg = make_app_config(application_id="a", bootstrap_servers="h:1", group_protocol="streams")
    assert cfg.consumer_settings()["group_protocol"] == "streams"
    with pytest.raises(ConfigError, match=r"upgrade\.from is for group\.protocol=classic"):
        make_app_config(
            application_id="a", bootstrap_servers="h:1", group_protocol="streams", upgrade_from="2.3"
        )


def test_the_members_endpoint_is_the_application_server() -> None:
    assert user_endpoint(None) is None
    assert user_endpoint("10.0.0.7:8080") == Endpoint(host="10.0.0.7", port=8080)
    assert user_endpoint("[::1]:9") == Endpoint(host="::1", port=9)
    with pytest.raises(ConfigError, match="host:port"):
        user_endpoint("nohost")


def test_the_endpoints_the_broker_sends_route_the_apps_queries() -> None:
    wiring = _wiring(None)
    hosts = EndpointPartitionsHosts(wordcount(), lambda: wiring.endpoints)
    assert hosts.endpoints() == ()
    words = "wordcount-words-repartition"
    wiring.endpoints_changed(
        EndpointsChanged(
            epoch=3,
            endpoints=(
                EndpointToPartitions(
                    user_endpoint=Endpoint(host="a", port=1),
                    active_partitions=(TopicPartitions(topic=words, partitions=(0,)),),
                    standby_partitions=(TopicPartitions(topic=words, partitions=(1,)),),
                ),
                EndpointToPartitions(
                    user_endpoint=Endpoint(host="b", port=2),
                    active_partitions=(TopicPartitions(topic=words, partitions=(1,)),),
                ),
            ),
        )
    )
    assert wiring.endpoints_epoch == 3
    assert hosts.hosts_of(TaskId(1, 1)) == TaskHosts(task=TaskId(1, 1), active="b:2", standbys=("a:1",))
    assert hosts.hosts_of(TaskId(1, 0)).active == "a:1"
