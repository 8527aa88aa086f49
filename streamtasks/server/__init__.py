"""``streamtasks coordinator``: streamtasks' KIP-848 group coordinator and its streams-group
(KIP-1071) coordinator served over the Kafka protocol in front of a real Kafka cluster, durable
in a compacted topic of that cluster (``docs/coordinator.md``). IO: asyncio, the backing cluster
through aiokafka and raw frames."""

from streamtasks.server.config import DEFAULT_NODE_ID, ListenerSettings, ServerConfig, parse_host_port
from streamtasks.server.log import DEFAULT_TOPIC, CoordinatorLog
from streamtasks.server.run import (
    add_coordinator_arguments,
    add_user_arguments,
    backing_values,
    config_from_args,
    listener_from_args,
    run_add_user,
    run_server,
)
from streamtasks.server.server import CoordinatorServer, wall_clock_ms

__all__ = [
    "DEFAULT_NODE_ID",
    "DEFAULT_TOPIC",
    "add_coordinator_arguments",
    "add_user_arguments",
    "backing_values",
    "ListenerSettings",
    "run_add_user",
    "config_from_args",
    "listener_from_args",
    "CoordinatorLog",
    "CoordinatorServer",
    "ServerConfig",
    "parse_host_port",
    "run_server",
    "wall_clock_ms",
]
