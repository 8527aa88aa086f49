"""Kafka's protocol error codes (the subset streamtasks speaks), with their retriable flag."""

from __future__ import annotations

import enum

__all__ = ["KafkaErrorCode"]


class KafkaErrorCode(enum.IntEnum):
    """Error codes as Apache Kafka numbers them on the wire.

    ``retriable`` follows Kafka's ``RetriableException`` hierarchy: the same request may
    succeed if sent again (possibly to a new coordinator).
    """

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    REQUEST_TIMED_OUT = 7
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    INVALID_PRODUCER_EPOCH = 47
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    # KIP-1071 streams groups
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE

    @classmethod
    def of(cls, code: int) -> KafkaErrorCode:
        """The member for ``code``; codes streamtasks does not know map to UNKNOWN_SERVER_ERROR."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


_RETRIABLE = frozenset(
    {
        KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        KafkaErrorCode.REQUEST_TIMED_OUT,
        KafkaErrorCode.NETWORK_EXCEPTION,
        KafkaErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaErrorCode.COORDINATOR_NOT_AVAILABLE,
        KafkaErrorCode.NOT_COORDINATOR,
        KafkaErrorCode.UNSTABLE_OFFSET_COMMIT,
        KafkaErrorCode.CONCURRENT_TRANSACTIONS,
    }
)
