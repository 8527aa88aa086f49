"""What every broker child process shares: a free loopback port, the Linux parent-death signal,
waiting for ApiVersions, a clean stop and the tail of its log on failure.

:class:`ChildBroker` holds that state once; :class:`~streamtasks.embedded.tansu.EmbeddedBroker`
and :class:`~streamtasks.embedded.kafka_broker.KafkaBroker` only say how their process starts.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Self

from streamtasks.embedded.cluster import api_versions, create_topics
from streamtasks.errors import BrokerError
from streamtasks.runtime.admin import TopicSpec

__all__ = ["ChildBroker", "die_with_parent", "free_port", "log_tail", "terminate", "unused_port"]

_PR_SET_PDEATHSIG = 1


def free_port(host: str) -> int:
    """A port the OS calls free on ``host`` right now (another process may still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def unused_port(host: str, taken: set[int]) -> int:
    """A :func:`free_port` not in ``taken``, added to ``taken``: several ports for one process."""
    port = free_port(host)
    while port in taken:
        port = free_port(host)
    taken.add(port)
    return port


def die_with_parent() -> None:
    """``preexec_fn``: the child gets SIGKILL when its parent dies, even by ``kill -9``.

    Linux ties the signal to the *thread* that forked: start brokers from a thread that lives
    as long as they should (the main thread, as pytest fixtures and the CLI do)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def log_tail(path: Path | None, limit: int = 3000) -> str:
    """The last ``limit`` characters of a log file ('' when there is none)."""
    if path is None:
        return ""
    with contextlib.suppress(OSError), path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - limit))
        return f.read().decode("utf-8", "replace")
    return ""


def terminate(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL; returns once the process is reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class ChildBroker:
    """A broker run as a child process on ``host:port``: start, wait for ApiVersions, stop.

    Subclasses implement :meth:`_spawn` (start the process on ``self.port``, writing its output
    to :attr:`log_path`) and may extend :meth:`_prepare` (once per start) and :meth:`_cleanup`
    (after the process is gone)."""

    #: How the broker is called in messages.
    kind = "broker"
    #: Seconds between SIGTERM and SIGKILL in :meth:`stop`.
    stop_timeout_s = 5.0

    def __init__(self, *, host: str, port: int | None, startup_timeout_s: float) -> None:
        self.host = host
        self.port = port or 0
        self._fixed_port = port is not None
        self._timeout = startup_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        #: The file the broker's output goes to (set by the subclass before spawning).
        self.log_path: Path | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> Self:
        """Start the broker and wait until it answers ApiVersions; raise BrokerError if it does not."""
        if self.running:
            return self
        self._prepare()
        attempts = 1 if self._fixed_port else 3
        last = ""
        for _ in range(attempts):
            if not self._fixed_port:
                self.port = free_port(self.host)
            try:
                self._proc = self._spawn()
            except BrokerError:
                self.stop()
                raise
            try:
                self._wait_ready()
            except BrokerError as exc:  # e.g. another process took the free port: try another
                last = str(exc)
                self.stop()
                continue
            atexit.register(self.stop)
            return self
        raise BrokerError(f"{self.kind} did not start: {last}")

    def _prepare(self) -> None:
        """Work done once per :meth:`start`, before any attempt (nothing by default)."""

    def _spawn(self) -> subprocess.Popen[bytes]:
        raise NotImplementedError

    def _cleanup(self) -> None:
        """Release what the last attempt left once its process is gone (nothing by default)."""

    def _log_tail(self) -> str:
        return log_tail(self.log_path)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._timeout
        error = "no answer"
        while time.monotonic() < deadline:
            if not self.running:
                raise BrokerError(f"{self.kind} process exited early; its log:\n{self._log_tail()}")
            try:
                versions = self.api_versions()
            except BrokerError as exc:
                error = str(exc)
                time.sleep(0.05)
                continue
            if versions:
                return
        raise BrokerError(
            f"no ApiVersions answer within {self._timeout}s ({error}); its log:\n{self._log_tail()}"
        )

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's ApiVersions: api key → (min version, max version)."""
        return api_versions(self.host, self.port)

    def create_topics(
        self, topics: Mapping[str, int] | Iterable[TopicSpec], *, exist_ok: bool = True
    ) -> None:
        """Create topics; see :func:`streamtasks.embedded.create_topics`."""
        create_topics(self.host, self.port, topics, exist_ok=exist_ok)

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout_s``); idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            terminate(proc, self.stop_timeout_s if timeout_s is None else timeout_s)
        self._cleanup()
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
