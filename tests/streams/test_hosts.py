"""The assignment metadata interactive queries route by: one implementation per group protocol,
the same answers from the classic / KIP-848 AssignmentInfo and from a streams group's
endpoint-to-partitions map."""

from __future__ import annotations

from streamtasks.protocol.streams_group import Endpoint, EndpointToPartitions, TopicPartitions
from streamtasks.protocol.userdata import AssignmentInfo
from streamtasks.streams.hosts import (
    AssignmentInfoHosts,
    EndpointPartitionsHosts,
    HostMetadata,
    TaskHosts,
    endpoint_text,
)
from topology import TaskId, TopologyBuilder


def _check(hosts: HostMetadata) -> None:
    assert hosts.hosts_of(TaskId(1, 0)) == TaskHosts(task=TaskId(1, 0), active="a:1", standbys=("b:2",))
    assert hosts.hosts_of(TaskId(1, 1)) == TaskHosts(task=TaskId(1, 1), active="b:2", standbys=("a:1",))
    assert hosts.hosts_of(TaskId(1, 2)) == TaskHosts(task=TaskId(1, 2), active=None, standbys=())
    assert hosts.endpoints() == ("a:1", "b:2")


def test_classic_and_kip848_read_the_assignment_infos_by_host_maps() -> None:
    info = AssignmentInfo(
        active_tasks_by_host={"a:1": frozenset({TaskId(1, 0)}), "b:2": frozenset({TaskId(1, 1)})},
        standby_tasks_by_host={"a:1": frozenset({TaskId(1, 1)}), "b:2": frozenset({TaskId(1, 0)})},
    )
    _check(AssignmentInfoHosts(lambda: info))
    assert AssignmentInfoHosts(AssignmentInfo).hosts_of(TaskId(0, 0)).active is None


def test_streams_groups_read_partitions_by_endpoint_through_the_topology() -> None:
    builder = TopologyBuilder("wc")
    builder.stream("lines").repartition("words").store("counts")
    topology = builder.build()
    words = "wc-words-repartition"

    def entry(host: str, port: int, active: int, standby: int) -> EndpointToPartitions:
        return EndpointToPartitions(
            user_endpoint=Endpoint(host=host, port=port),
            active_partitions=(
                TopicPartitions(topic=words, partitions=(active,)),
                TopicPartitions(topic="not-a-source", partitions=(7,)),
            ),
            standby_partitions=(TopicPartitions(topic=words, partitions=(standby,)),),
        )

    current = [entry("a", 1, 0, 1), entry("b", 2, 1, 0)]
    hosts = EndpointPartitionsHosts(topology, lambda: current)
    _check(hosts)
    current = [entry("b", 2, 0, 1)]  # a new heartbeat answer replaces the map
    assert hosts.hosts_of(TaskId(1, 0)).active == "b:2"
    assert hosts.endpoints() == ("b:2",)


def test_an_ipv6_endpoint_is_bracketed() -> None:
    assert endpoint_text("::1", 80) == "[::1]:80"
    assert endpoint_text("h", 80) == "h:80"
