"""``streamtasks coordinator`` as a child process for live tests: started on fixed ports (so a
restart comes back where clients look for it), killed with -9 or stopped with SIGTERM, its
stderr collected line by line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from streamtasks.embedded._process import die_with_parent, free_port

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--session-timeout-ms", "6000", "--heartbeat-interval-ms", "500", "--status-interval-s", "1")


class ServerProcess:
    def __init__(self, bootstrap: str, *, topic: str | None = None, extra: tuple[str, ...] = FAST) -> None:
        self.bootstrap = bootstrap
        self.topic = topic or f"_st_coord_{uuid.uuid4().hex[:8]}"
        self.port = free_port("127.0.0.1")
        self.proxy_base = free_port("127.0.0.1")
        self.extra = extra
        self.lines: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> ServerProcess:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamtasks",
                "coordinator",
                "--listen",
                self.address,
                "--bootstrap-servers",
                self.bootstrap,
                "--topic",
                self.topic,
                "--proxy-port-base",
                str(self.proxy_base),
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - as the embedded brokers do
        )
        ready = threading.Event()
        proc = self.proc

        def read() -> None:
            assert proc.stderr is not None
            for raw in proc.stderr:
                line = raw.decode(errors="replace").rstrip()
                self.lines.append(line)
                if "listening on" in line:
                    ready.set()
            proc.stderr.close()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while not ready.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("coordinator did not start:\n" + "\n".join(self.lines[-30:]))
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout_s: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def status(self) -> str:
        return next((line for line in reversed(self.lines) if line.startswith("status:")), "")

    def stop(self) -> None:
        if self.alive():
            try:
                self.terminate()
            except subprocess.TimeoutExpired:
                self.kill()


def status_count(server: ServerProcess, what: str) -> int:
    """The status line's ``what=N`` (the whole word: ``heartbeats`` is not ``streams_heartbeats``)."""
    found = re.search(rf"(?<![\w]){re.escape(what)}=(\d+)", server.status())
    return int(found.group(1)) if found else 0
