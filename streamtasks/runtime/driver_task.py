"""The group member's driver runs as one asyncio task beside the consumer; how its end is read."""

from __future__ import annotations

import asyncio
import logging

__all__ = ["log_driver_end", "task_failure"]

log = logging.getLogger("streamtasks.consumer")


def task_failure(task: asyncio.Task[None] | None) -> BaseException | None:
    """The exception a finished task raised (``None``: running, cancelled or ended cleanly)."""
    if task is None or not task.done() or task.cancelled():
        return None
    return task.exception()


def log_driver_end(task: asyncio.Task[None]) -> None:
    """A done callback: a driver that failed is logged once (no more heartbeats after it)."""
    crash = task_failure(task)
    if crash is not None:
        log.error("the group member's driver failed; no more heartbeats: %r", crash, exc_info=crash)
