"""Testing an App's processors without a broker: :class:`TopologyTestDriver` (see
:mod:`streamtasks.testing.driver` and docs/app.md, "Testing without a broker")."""

from streamtasks.testing.driver import DriverError, TopologyTestDriver
from streamtasks.testing.records import TestInputTopic, TestOutputTopic, TestRecord
from streamtasks.testing.stores import StoreView, WindowStoreView
from streamtasks.testing.topics import InMemoryProducer, InMemoryTopics, StoredRecord

__all__ = [
    "DriverError",
    "InMemoryProducer",
    "InMemoryTopics",
    "StoreView",
    "StoredRecord",
    "TestInputTopic",
    "TestOutputTopic",
    "TestRecord",
    "TopologyTestDriver",
    "WindowStoreView",
]
