"""The one error tree of streamtasks.

Every exception streamtasks raises on purpose derives from :class:`StreamTasksError`.
This module imports nothing from the rest of the project, so every layer (``topology``,
``assignors``, the codecs, the runtime) may raise from it without breaking the layering.
"""

from __future__ import annotations

__all__ = [
    "AssignorError",
    "AssignorInputError",
    "BrokerError",
    "ConfigError",
    "CopartitionError",
    "DecodeError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "StreamTasksError",
    "TopologyError",
    "UnknownAssignorError",
    "UnsupportedVersionError",
]


class StreamTasksError(Exception):
    """Root of every error streamtasks raises on purpose."""


class ConfigError(StreamTasksError, ValueError):
    """A configuration value is missing, malformed or out of range."""


class TopologyError(StreamTasksError, ValueError):
    """The topology is not well formed (duplicate names, missing partition counts, ...)."""


class CopartitionError(TopologyError):
    """Source topics of one subtopology do not have the same number of partitions."""


class DecodeError(StreamTasksError, ValueError):
    """Bytes received from another member or the broker could not be decoded."""


class LocalProtocolError(StreamTasksError):
    """This process tried to do something the protocol does not allow in its state."""


class RemoteProtocolError(StreamTasksError):
    """A peer (broker or member) did something the protocol does not allow."""


class AssignorError(StreamTasksError):
    """An assignor could not produce an assignment."""


class AssignorInputError(AssignorError, ValueError):
    """The input handed to an assignor is inconsistent (unknown task, duplicate process, ...)."""


class UnknownAssignorError(AssignorError, LookupError):
    """No assignor is registered under the requested name."""


class UnsupportedVersionError(AssignorError):
    """A member's metadata version is older than this process can handle."""


class BrokerError(StreamTasksError):
    """The Kafka broker could not be started, reached, or did not do what was asked."""


# -- security (streamtasks.protocol.sasl, streamtasks.runtime.security) ------------------------

__all__ += ["AuthenticationError", "AuthorizationError", "ConnectionSecurityError", "SaslError", "TlsError"]


class SaslError(StreamTasksError, ValueError):
    """A SASL exchange cannot go on: a malformed or unexpected message, a bad proof or server
    signature, or unusable local input. The message never carries a password, token or key."""


class ConnectionSecurityError(StreamTasksError):
    """A broker refused this client for a security reason (TLS, authentication, authorization):
    fatal, never retried (the same settings would fail the same way). Not a
    :class:`BrokerError`, which loops retry."""


class AuthenticationError(ConnectionSecurityError):
    """The broker refused this client's SASL authentication (wrong password, a mechanism it
    does not enable, a token it rejects) or did not prove it knows the password."""


class AuthorizationError(ConnectionSecurityError):
    """The broker denies this client's principal what it asked for (a missing ACL on the group
    or a topic: GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED)."""


class TlsError(ConnectionSecurityError):
    """The TLS session with the broker could not be set up: an untrusted or expired
    certificate, a host-name mismatch, or a TLS/plaintext mix-up between client and listener."""


# -- local state (streamtasks.state) ---------------------------------------------------------

__all__ += [
    "CheckpointError",
    "SerdeError",
    "StateDirectoryLockedError",
    "StateError",
    "StoreClosedError",
]


class StateError(StreamTasksError):
    """Local state (state directory, stores, checkpoints) is unusable or was misused."""


class CheckpointError(StateError, ValueError):
    """A checkpoint file is malformed, or the offsets handed to the writer cannot be written."""


class StoreClosedError(StateError):
    """A key-value store was used after it was closed."""


class SerdeError(StateError, ValueError):
    """A serde could not turn bytes into a value (or a value into bytes)."""


class StateDirectoryLockedError(StateError):
    """Another process holds the lock of the application's state directory."""


# -- the consumer and the app (streamtasks.runtime, streamtasks.app) -------------------------

__all__ += [
    "CommitFailedError",
    "ConsumerFailedError",
    "ProcessingError",
    "TaskCorruptedError",
    "TaskMigratedError",
    "TransactionAbortedError",
    "UndeclaredTopicError",
    "UnknownStoreError",
]


class CommitFailedError(StreamTasksError):
    """The coordinator rejected an offset commit (e.g. this member was fenced or the group
    rebalanced); the offsets were not stored."""


class ConsumerFailedError(StreamTasksError):
    """The member hit a fatal group error (e.g. FENCED_INSTANCE_ID) and cannot continue."""


class ProcessingError(StreamTasksError):
    """A processor raised, or a changelog / output record could not be delivered. The app
    stops; offsets are committed only up to the last record whose effects were delivered."""


class TransactionAbortedError(ProcessingError):
    """Exactly-once: the transaction holding the latest changelog, output and offset writes was
    aborted (this process was fenced: the group or a newer producer moved on; or a write or the
    commit failed). None of those writes became visible. The app revives its active tasks in
    place (closed dirty, stores rebuilt from the changelog, processing again from the committed
    offsets, see :class:`TaskCorruptedError`); it raises this only when the abort is fatal
    (the producer cannot go on, e.g. not authorized) or recurs past ``task_timeout_ms``."""


class TaskCorruptedError(ProcessingError):
    """A changelog, output or repartition record was not delivered for a retriable reason (a
    leader moving, too few in-sync replicas, a request timing out), or an exactly-once
    transaction was aborted: the active tasks are closed dirty, their stores rebuilt from the
    changelog, and they process again from the committed offsets (Kafka Streams'
    ``TaskCorruptedException``). The app raises it only when the same happens again after
    ``task_timeout_ms`` without a commit in between (KIP-572)."""


class TaskMigratedError(TransactionAbortedError):
    """Exactly-once: this process was fenced (a newer producer with its transactional id, or the
    group coordinator rejected its generation / member epoch). Its tasks are lost: closed dirty,
    the producer is recreated, and the member rejoins (Kafka Streams' ``TaskMigratedException``)."""


class UnknownStoreError(StreamTasksError):
    """A processor asked for a store or repartition topic its subtopology does not declare."""


class UndeclaredTopicError(UnknownStoreError):
    """A processor forwarded to a repartition topic its subtopology does not declare
    (``ctx.forward``; ``ctx.send`` writes to any topic)."""


# -- interactive queries (streamtasks.app.queries) ---------------------------------------------

__all__ += ["QueryError", "StoreUnavailableError"]


class QueryError(StreamTasksError):
    """An interactive query could not be answered and asking again will not help (a peer
    answered something malformed, or refused the query)."""


class StoreUnavailableError(QueryError):
    """Retryable: the store cannot answer for the key right now (the group is rebalancing, the
    key's task is moving, restoring, or not hosted where the metadata says, its host is
    unreachable). ``reason`` is a short code (``rebalancing``, ``not-hosted``, ``restoring``,
    ``not-active``, ``no-host``, ``unreachable``, ``not-running``); never a stale value."""

    retryable = True

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
