"""streamtasks: Kafka Streams-style task assignment for Python stream apps.

The package root stays import-light on purpose: the pure layers (``topology``,
``assignors``, ``streamtasks.protocol``) import :mod:`streamtasks.errors`, and that must not
drag in the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamtasks._version import __version__
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
    UndeclaredTopicError,
    UnknownAssignorError,
    UnknownStoreError,
    UnsupportedVersionError,
)

if TYPE_CHECKING:  # what __getattr__ returns, as type checkers see it (``X as X``: re-exported)
    from streamtasks.app import App as App
    from streamtasks.app import AppConfig as AppConfig
    from streamtasks.app import ProcessorContext as ProcessorContext
    from streamtasks.app import Record as Record
    from streamtasks.embedded import EmbeddedBroker as EmbeddedBroker
    from streamtasks.embedded import KafkaBroker as KafkaBroker
    from streamtasks.runtime.consumer import Consumer as Consumer
    from streamtasks.runtime.security import ClientSettings as ClientSettings
    from streamtasks.runtime.security import SecuritySettings as SecuritySettings
    from streamtasks.runtime.security import load_client_config as load_client_config


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
    "UndeclaredTopicError",
    "UnknownAssignorError",
    "UnknownStoreError",
    "UnsupportedVersionError",
    "__version__",
]
