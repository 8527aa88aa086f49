"""streamtasks: Kafka Streams-style task assignment for Python stream apps.

The package root stays import-light on purpose: the pure layers (``topology``,
``assignors``, ``streamtasks.protocol``) import :mod:`streamtasks.errors`, and that must not
drag in the runtime.
"""

from __future__ import annotations

from streamtasks.errors import (
    AssignorError,
    AssignorInputError,
    BrokerError,
    ConfigError,
    CopartitionError,
    DecodeError,
    LocalProtocolError,
    RemoteProtocolError,
    StreamTasksError,
    TopologyError,
    UnknownAssignorError,
    UnsupportedVersionError,
)

__version__ = "0.4.0"

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
    "__version__",
]
