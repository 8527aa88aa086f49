"""How the KIP-848 world names its topics (ids) and shows its messages in the trace."""

from __future__ import annotations

import uuid

from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from streamtasks.sim.host import describe_fields

__all__ = ["describe", "topic_id"]


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"streamtasks-sim/{name}")


def describe(message: object) -> str:
    name = type(message).__name__.replace("ConsumerGroup", "")
    fields = describe_fields(
        message,
        ("error", "member_id", "member_epoch", "generation_id", "group_epoch", "should_compute_assignment"),
    )
    assignment = getattr(message, "assignment", None)
    if assignment is not None and not isinstance(assignment, bytes):
        fields.append(
            f"assigned={[(str(t.topic_id)[:4], t.partitions) for t in assignment.topic_partitions]}"
        )
    owned = getattr(message, "topic_partitions", None)
    if owned is not None and isinstance(message, ConsumerGroupHeartbeatRequest):
        fields.append(f"owned={[(str(t.topic_id)[:4], t.partitions) for t in owned]}")
    return f"{name}({', '.join(fields)})"
