"""``streamtasks coordinator`` as a child process of a drill: the KIP-848 coordinator with
client-side assignment in front of the drill's cluster, on a free loopback port, its own log
topic, its stderr kept (and copied to ``<logs>/coordinator.log`` when the drills' logs
directory is set). Started like the tests start it (tests/server/support.py), asynchronously.

    coordinator = CoordinatorProcess(cluster.bootstrap_servers)
    address = await coordinator.start()      # "127.0.0.1:<port>": what the members bootstrap to
    ...
    await coordinator.stop()                 # SIGTERM: a clean stop
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
import uuid

from streamtasks.drills._proc import open_log
from streamtasks.embedded._process import die_with_parent
from streamtasks.errors import BrokerError
from streamtasks.runtime.client_file import child_client_config
from streamtasks.runtime.security import ClientSettings

__all__ = ["SECURED_COORDINATOR_REFUSED", "CoordinatorProcess"]

#: Why the drills do not put a streamtasks coordinator in front of a secured cluster: its
#: members would reach the cluster through the coordinator's open listener, under the
#: coordinator's own principal (docs/security.md, the trust model).
SECURED_COORDINATOR_REFUSED = (
    "a streamtasks coordinator in front of a secured cluster (--coordinator, --protocol consumer-client) "
    "is not run by the drills: its members would reach the cluster under the coordinator's principal "
    "(docs/security.md); use the cluster's own coordinator (--protocol cooperative, eager or consumer)"
)

_LISTENING = re.compile(r"listening on (\S+):(\d+)")


class CoordinatorProcess:
    """One ``streamtasks coordinator`` process in front of ``bootstrap`` (module docstring)."""

    def __init__(
        self,
        bootstrap: str | ClientSettings,
        *,
        session_timeout_ms: int = 6_000,
        heartbeat_interval_ms: int = 500,
        status_interval_s: float = 5.0,
    ) -> None:
        settings = ClientSettings.of(bootstrap)
        self.bootstrap = settings.bootstrap_servers
        self.topic = f"_st_coord_demo_{uuid.uuid4().hex[:8]}"
        self.argv = [
            "--listen", "127.0.0.1:0", "--bootstrap-servers", self.bootstrap, "--topic", self.topic,
            *child_client_config(settings),  # the backing cluster's TLS/SASL, from a 0600 file
            "--session-timeout-ms", str(session_timeout_ms),
            "--heartbeat-interval-ms", str(heartbeat_interval_ms),
            "--status-interval-s", str(status_interval_s),
        ]  # fmt: skip
        self.address: str | None = None
        self.lines: list[str] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self, timeout_s: float = 60.0) -> str:
        """Start it and return the address it listens on, once it says so (after replaying its
        log); :class:`BrokerError` with its last lines if it exits or stays silent instead."""
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "streamtasks", "coordinator", *self.argv,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            preexec_fn=die_with_parent,  # as the embedded brokers do
        )  # fmt: skip
        listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.get_running_loop().create_task(self._read(listening))
        try:
            self.address = await asyncio.wait_for(asyncio.shield(listening), timeout_s)
        except (TimeoutError, EOFError):
            await self.stop()
            if listening.done():
                listening.exception()  # retrieved: the reason is in its lines
            tail = "\n".join(self.lines[-20:])
            raise BrokerError(f"streamtasks coordinator did not start:\n{tail}") from None
        return self.address

    async def _read(self, listening: asyncio.Future[str]) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        copy = open_log("coordinator.log", "a")
        try:
            async for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip()
                self.lines.append(line)
                if copy is not None:
                    copy.write(line + "\n")
                    copy.flush()
                match = _LISTENING.search(line)
                if match and not listening.done():
                    listening.set_result(f"{match.group(1)}:{match.group(2)}")
        finally:
            if not listening.done():
                listening.set_exception(EOFError("the coordinator exited"))
            if copy is not None:
                copy.close()

    def status(self) -> str:
        """Its latest status line (groups, members, epochs, prepares, installs, ...)."""
        return next((line for line in reversed(self.lines) if line.startswith("status:")), "")

    def counter(self, name: str) -> int:
        """One ``name=<n>`` figure of the latest status line (0 before the first)."""
        match = re.search(rf"\b{re.escape(name)}=(\d+)", self.status())
        return int(match.group(1)) if match else 0

    async def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``; waits for its output to end."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout_s)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
