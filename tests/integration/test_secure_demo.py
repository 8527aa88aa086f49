"""``streamtasks demo --secure``: the demo over the secured Apache Kafka's SASL_SSL listener with
SCRAM-SHA-512, and not one copy of the password in anything it printed or wrote (issue 25,
items 1 and 5).

The demo runs as a child process with its output captured, its workers' logs kept
(``STREAMTASKS_DEMO_LOGS``), every client library at DEBUG (``STREAMTASKS_DEMO_DEBUG``: aiokafka
logs every request there, SaslAuthenticate included) and its own temporary directory
(``TMPDIR``: the broker's files, the certificates and the workers' 0600 client config land
there); the password is fixed (``STREAMTASKS_DEMO_PASSWORD``) so that the test knows what to
look for.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamtasks.embedded import BOOTSTRAP_ENV
from streamtasks.embedded.kafka_broker import kafka_requirements_missing

pytestmark = pytest.mark.integration

PASSWORD = "Xq7-distinctive-demo-secret-41f"


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


def test_secure_demo_runs_over_sasl_ssl_and_never_shows_the_password(tmp_path: Path) -> None:
    missing = kafka_requirements_missing()
    if missing is not None:
        pytest.skip(f"the secured demo needs Apache Kafka: {missing}")
    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"{BOOTSTRAP_ENV} names a cluster; the secured demo starts its own broker")
    logs, temp = tmp_path / "logs", tmp_path / "tmp"
    temp.mkdir()
    env = {
        **os.environ,
        "STREAMTASKS_DEMO_LOGS": str(logs),
        "STREAMTASKS_DEMO_DEBUG": "1",
        "STREAMTASKS_DEMO_PASSWORD": PASSWORD,
        "TMPDIR": str(temp),
    }
    env.pop("STREAMTASKS_CLIENT_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-m", "streamtasks", "demo", "--secure", "--phase", "dynamic"],
        capture_output=True,
        env=env,
        timeout=600,
        check=False,
    )
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    assert done.returncode == 0, out[-3000:] + err[-3000:]
    assert "SASL_SSL on" in out
    assert "SCRAM-SHA-512 as user app" in out
    assert "result: OK" in out
    assert "lost 0" in out
    assert "rolling bounce, dynamic members" in out
    # The DEBUG logs are there (so the grep below looked at aiokafka's requests) ...
    assert "SaslAuthenticate" in err
    worker_logs = sorted(logs.glob("worker-*.log"))
    assert worker_logs
    assert any(b"SaslAuthenticate" in p.read_bytes() for p in worker_logs)
    # ... and not one of them, nor anything else printed or left behind, holds the password.
    secret = PASSWORD.encode()
    assert secret not in done.stdout
    assert secret not in done.stderr
    assert _files_holding(logs, secret) == []
    assert _files_holding(temp, secret) == []  # the 0600 client config went with the demo
