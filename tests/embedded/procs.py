"""Process checks shared by the broker tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def wait_for_text(path: Path, text: str, timeout_s: float = 30.0) -> str:
    """The file's contents once they hold ``text`` (or, after ``timeout_s``, as they are): a
    process may log a line a moment after it has begun answering requests."""
    deadline = time.monotonic() + timeout_s
    content = path.read_text()
    while text not in content and time.monotonic() < deadline:
        time.sleep(0.1)
        content = path.read_text()
    return content


def broker_outlives_killed_parent(start_expression: str) -> bool:
    """Start a broker (``start_expression`` evaluates to a started one) in a child Python,
    ``kill -9`` that child, and say whether the broker process is still alive afterwards."""
    code = (
        "import time\n"
        "from streamtasks.embedded import EmbeddedBroker, KafkaBroker\n"
        f"b = {start_expression}\n"
        "print(b.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert parent.stdout is not None
    try:
        broker_pid = int(parent.stdout.readline())
        assert alive(broker_pid)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        parent.stdout.close()
    return not wait_gone(broker_pid)
