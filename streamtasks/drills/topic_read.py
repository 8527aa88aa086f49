"""Reading a whole topic once, to its true end: what the drills' audits read back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import ConsumerRecord

from streamtasks.app.changelog import ChangelogReader
from streamtasks.errors import StreamTasksError
from streamtasks.runtime.aio import from_aio, to_aio
from streamtasks.runtime.aiokafka_security import start_aiokafka
from streamtasks.runtime.security import ClientSettings
from topology.ids import TopicPartition

__all__ = ["end_offsets", "read_topic"]


async def end_offsets(
    bootstrap: str | ClientSettings, parts: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """True end offsets: :class:`ChangelogReader` confirms ListOffsets with a fetch's high
    watermark (the embedded broker's ListOffsets falls short, docs/testing.md)."""
    reader = ChangelogReader(bootstrap, client_id="streamtasks-drill-reader")
    await reader.start()
    try:
        return await reader.end_offsets(parts)
    finally:
        await reader.stop()


async def read_topic(
    bootstrap: str | ClientSettings,
    topic: str,
    handle: Callable[[ConsumerRecord[Any, Any]], None],
    *,
    timeout_s: float = 120.0,
) -> None:
    """Hand every record of ``topic``, from its beginning up to the end offsets it has when
    this starts, to ``handle`` (a fresh consumer, no group)."""
    settings = ClientSettings.of(bootstrap)
    consumer = AIOKafkaConsumer(
        topic,
        **settings.aiokafka_kwargs(),
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await start_aiokafka(consumer, settings, f"the reader of {topic!r}")
    clock = asyncio.get_running_loop()
    deadline = clock.time() + timeout_s
    try:
        while not consumer.assignment():  # every partition, once the topic's metadata arrived
            if clock.time() >= deadline:
                raise StreamTasksError(f"topic {topic!r} has no partitions in the cluster's metadata")
            await asyncio.sleep(0.1)
        parts = consumer.assignment()
        ends = {
            to_aio(tp): end
            for tp, end in (await end_offsets(bootstrap, [from_aio(p) for p in parts])).items()
        }
        while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
            if clock.time() >= deadline:
                raise StreamTasksError(f"topic {topic!r} was not read to its end within {timeout_s:.0f} s")
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for record in records:
                    handle(record)
    finally:
        await consumer.stop()
