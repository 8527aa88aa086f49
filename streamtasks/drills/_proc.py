"""What the drills' worker processes share: spawning one (with its logs kept when
``STREAMTASKS_DEMO_LOGS=dir`` is set), reading its JSON lines, and its logging set-up."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import IO, Any

__all__ = [
    "DEBUG_ENV",
    "LOGS_ENV",
    "clients_debug",
    "configure_logging",
    "line_time_ms",
    "open_log",
    "pump_json_lines",
    "spawn_worker",
]

#: A directory where the drills keep worker logs and event lines (unset: discard them).
LOGS_ENV = "STREAMTASKS_DEMO_LOGS"
#: Set (to anything but empty or 0): the client libraries log at DEBUG too, in the workers' logs
#: and on the demo's stderr (aiokafka logs every request there, SaslAuthenticate included:
#: the secured demo's test checks that no secret gets through).
DEBUG_ENV = "STREAMTASKS_DEMO_DEBUG"


def open_log(name: str, mode: str = "ab") -> IO[Any] | None:
    """``<logs>/<name>`` opened with ``mode`` when the logs directory is set (made if missing),
    else None."""
    log_dir = os.environ.get(LOGS_ENV)
    if not log_dir:
        return None
    os.makedirs(log_dir, exist_ok=True)
    return open(os.path.join(log_dir, name), mode)


def clients_debug() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


async def spawn_worker(
    module: str, argv: list[str], *, log_name: str, log_level: str = "DEBUG"
) -> asyncio.subprocess.Process:
    """``python -m module *argv`` with stdout piped; stderr goes to ``<logs>/<log_name>.log``
    at ``log_level`` when the logs directory is set, else nowhere."""
    log_dir = os.environ.get(LOGS_ENV)
    stderr: Any = asyncio.subprocess.DEVNULL
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        stderr = open(os.path.join(log_dir, f"{log_name}.log"), "ab")  # noqa: SIM115
        argv = [*argv, "--log-level", log_level]
    try:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", module, *argv, stdout=asyncio.subprocess.PIPE, stderr=stderr
        )
    finally:
        if log_dir:
            stderr.close()  # the child has its own descriptor


async def pump_json_lines(
    proc: asyncio.subprocess.Process, events_file: str, handle: Callable[[dict[str, Any]], None]
) -> None:
    """Feed every JSON line the process prints to ``handle`` (other lines are skipped); with
    the logs directory set, also append the raw lines to ``<logs>/<events_file>``."""
    assert proc.stdout is not None
    events = open_log(events_file)
    try:
        async for raw in proc.stdout:
            if events is not None:
                events.write(raw)
                events.flush()
            with contextlib.suppress(ValueError):
                handle(json.loads(raw))
    finally:
        if events is not None:
            events.close()


def line_time_ms(line: dict[str, Any], read_ms: int, monotonic_to_wall_ms: int) -> int:
    """When a worker's line happened, in wall-clock ms: its own ``t`` (``CLOCK_MONOTONIC``,
    one clock for every process of the machine, shifted by ``monotonic_to_wall_ms``), else the
    app event's ``at_ms`` or the line's ``wall_ms``; ``read_ms`` (when the harness read it)
    when it says none, and never later than that."""
    own = line.get("t")
    if isinstance(own, int):
        return min(read_ms, own + monotonic_to_wall_ms)
    for key in ("at_ms", "wall_ms"):
        wall = line.get(key)
        if isinstance(wall, int):
            return min(read_ms, wall)
    return read_ms


def configure_logging(level: str) -> None:
    """A worker's stderr logging; aiokafka and asyncio no chattier than INFO."""
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("aiokafka", "asyncio"):
        floor = logging.DEBUG if clients_debug() and noisy == "aiokafka" else logging.INFO
        logging.getLogger(noisy).setLevel(max(floor, logging.getLevelName(level)))
