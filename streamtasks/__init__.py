"""streamtasks: Kafka Streams-style task assignment for Python stream apps.

The package root stays import-light on purpose: the pure layers (``topology``,
``assignors``, ``streamtasks.protocol``) import :mod:`streamtasks.errors`, and that must not
drag in the runtime.
"""

from __future__ import annotations

from streamtasks.errors import (
    AssignorError,
    AssignorInputError,
    AuthenticationError,
    AuthorizationError,
    BrokerError,
    CommitFailedError,
    ConfigError,
    ConnectionSecurityError,
    ConsumerFailedError,
    CopartitionError,
    DecodeError,
    LocalProtocolError,
    ProcessingError,
    RemoteProtocolError,
    SaslError,
    StreamTasksError,
    TlsError,
    TopologyError,
    UnknownAssignorError,
    UnknownStoreError,
    UnsupportedVersionError,
)

__version__ = "0.4.0"


def __getattr__(name: str) -> object:
    # The runtime (asyncio, aiokafka) loads only when asked for, keeping ``import streamtasks``
    # light for the pure layers that import ``streamtasks.errors``.
    if name == "Consumer":
        from streamtasks.runtime import consumer

        return getattr(consumer, name)
    if name in ("ClientSettings", "SecuritySettings", "load_client_config"):
        from streamtasks.runtime import security

        return getattr(security, name)
    if name in ("App", "AppConfig", "ProcessorContext", "Record"):
        from streamtasks import app

        return getattr(app, name)
    if name in ("EmbeddedBroker", "KafkaBroker"):
        from streamtasks import embedded

        return getattr(embedded, name)
    raise AttributeError(f"module 'streamtasks' has no attribute {name!r}")


__all__ = [
    "AssignorError",
    "AssignorInputError",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerError",
    "CommitFailedError",
    "ConfigError",
    "ConnectionSecurityError",
    "ConsumerFailedError",
    "CopartitionError",
    "DecodeError",
    "LocalProtocolError",
    "ProcessingError",
    "RemoteProtocolError",
    "SaslError",
    "StreamTasksError",
    "TlsError",
    "TopologyError",
    "UnknownAssignorError",
    "UnknownStoreError",
    "UnsupportedVersionError",
    "__version__",
]
