"""The app model: subtopologies, state stores, internal topics and the tasks they yield."""

from topology.builder import StreamBuilder, TopologyBuilder
from topology.ids import TaskId, TopicPartition
from topology.model import RepartitionTopic, StateStore, Subtopology, TaskInfo, Topology
from topology.names import changelog_topic, repartition_topic

__all__ = [
    "RepartitionTopic",
    "StateStore",
    "StreamBuilder",
    "Subtopology",
    "TaskId",
    "TaskInfo",
    "TopicPartition",
    "Topology",
    "TopologyBuilder",
    "changelog_topic",
    "repartition_topic",
]
