"""Fixtures for the sweep tests: Java (PySpark 4 needs 17+), a local[2] SparkSession, and a
Spark standalone master and worker on loopback started from pyspark's own scripts."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def java_problem() -> str | None:
    """Why PySpark cannot run here, or ``None``."""
    java = shutil.which("java")
    if java is None:
        return "Java is missing: PySpark 4 needs a Java 17+ runtime on PATH"
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)', out)
    if match is None or int(match.group(1)) < 17:
        return f"PySpark 4 needs Java 17+, found: {out.splitlines()[0] if out else 'no version'}"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install -e '.[dev]')"
    return None


requires_spark = pytest.mark.skipif(java_problem() is not None, reason=str(java_problem()))


@pytest.fixture(scope="module")
def local_spark() -> Iterator[Any]:
    from streamtasks.sweeps.job import spark_session

    session = spark_session("local[2]", "streamtasks-sweep-tests")
    yield session
    session.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and re.search(pattern, path.read_text(errors="replace")):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise RuntimeError(f"{pattern!r} not seen in {path} (exit {proc.poll()}):\n{path.read_text()[-3000:]}")


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[str]:
    """``spark://127.0.0.1:PORT``: a standalone master and one worker (2 cores), both stopped
    (by their process ids) at teardown."""
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    spark_class = spark_home / "bin" / "spark-class"
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1"}
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, args: list[str], ready: str) -> None:
        log_path = tmp_path / f"{name}.log"
        with log_path.open("wb") as log:
            procs.append(
                subprocess.Popen(
                    [
                        "bash",
                        str(spark_class),
                        *args,
                        "--host",
                        "127.0.0.1",
                        "--webui-port",
                        str(_free_port()),
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        _wait_for(log_path, ready, procs[-1], 90)

    try:
        start(
            "master",
            ["org.apache.spark.deploy.master.Master", "--port", str(port)],
            r"I have been elected leader|Starting Spark master",
        )
        start(
            "worker",
            [
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--cores",
                "2",
                "--memory",
                "1g",
                "--work-dir",
                str(tmp_path / "work"),
            ],
            r"Successfully registered with master",
        )
        yield url
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
