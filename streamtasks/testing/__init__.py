"""Testing a streamtasks App's processors without a broker (see :mod:`streamtasks.testing.driver`)."""

from streamtasks.testing.topics import InMemoryProducer, InMemoryTopics, StoredRecord

__all__ = ["InMemoryProducer", "InMemoryTopics", "StoredRecord"]
