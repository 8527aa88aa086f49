"""Install by name: the wheel, installed into a fresh virtualenv outside the checkout.

The wheel is built from a copy of the sources the distribution ships (``pip wheel --no-deps
--no-build-isolation``: no ``build/`` left in the checkout, the running setuptools), and installed
into a new ``python -m venv`` (no system site-packages, no ``PYTHONPATH``) with its dependencies
from the package index, as a user would. Every command runs there from a directory outside the
checkout: ``streamtasks --version``, ``streamtasks assign sample`` (a scenario shipped as package
data) and ``streamtasks demo --phase bounce --broker kafka``, which starts the embedded Apache Kafka
from the pom the wheel carries. Last, the App on README's first screen runs as it stands, from the
installed wheel, against the session's broker.
"""

from __future__ import annotations

import asyncio
import collections
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

import streamtasks
from streamtasks.cli import main
from streamtasks.embedded import Cluster
from streamtasks.embedded.kafka_broker import kafka_requirements_missing
from streamtasks.runtime.admin import create_topics_async

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "streamtasks-kafka"
#: What the sdist and wheel are built from (pyproject.toml's packages, readme and license files).
SHIPPED = ("pyproject.toml", "README.md", "LICENSE", "streamtasks", "topology", "assignors")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in SHIPPED:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    _run([*command, "--wheel-dir", str(dist), str(source)], cwd=dist, timeout=300)
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    home = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", str(home)], cwd=home, timeout=120)
    pip = [str(home / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "install", "--quiet", str(wheel)], cwd=home, env=_clean_env(home), timeout=600)
    return home


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the checkout (so the checkout is not on sys.path)."""
    assert not tmp_path.is_relative_to(ROOT)
    return tmp_path


def _clean_env(venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a user's shell: the venv first on PATH, no PYTHONPATH pointing at the
    checkout, no STREAMTASKS_* of the test session (the demo must start its own broker)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("STREAMTASKS_")
    }
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env.update(extra)
    return env


def _run(
    command: list[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def test_the_wheel_carries_the_package_data_and_license(wheel: Path) -> None:
    assert wheel.name == f"streamtasks_kafka-{streamtasks.__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    info = f"streamtasks_kafka-{streamtasks.__version__}.dist-info"
    for expected in (
        "streamtasks/embedded/broker/pom.xml",
        "streamtasks/scenarios/sample.yaml",
        "streamtasks/py.typed",
        "topology/py.typed",
        "assignors/py.typed",
        f"{info}/licenses/LICENSE",
    ):
        assert expected in names
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert f"Name: {DISTRIBUTION}\n" in metadata
    assert "License-Expression: Apache-2.0\n" in metadata
    assert "License-File: LICENSE\n" in metadata
    assert not any(n.startswith(("tests/", "java/", "examples/", "benchmarks/")) for n in names)


def test_installed_outside_the_checkout(venv: Path, outside: Path) -> None:
    code = (
        "import importlib.metadata as m, streamtasks, topology, assignors\n"
        "from streamtasks.embedded.kafka_broker import broker_pom, kafka_version\n"
        f"d = m.distribution({DISTRIBUTION!r})\n"
        "lic = [f for f in d.files if f.name == 'LICENSE']\n"
        "print(streamtasks.__file__, topology.__file__, assignors.__file__, broker_pom(), sep='\\n')\n"
        "print(streamtasks.__version__, d.version, kafka_version())\n"
        "print(lic[0].read_text().splitlines()[1].strip())\n"
    )
    python = str(venv / "bin" / "python")
    lines = _run([python, "-c", code], cwd=outside, env=_clean_env(venv), timeout=60).stdout.splitlines()
    site = (venv / "lib").resolve()
    for path in lines[:4]:
        assert Path(path).resolve().is_relative_to(site), path
    assert lines[4].split() == [streamtasks.__version__, streamtasks.__version__, "4.4.0"]
    assert lines[5] == "Apache License"

    version = _run(["streamtasks", "--version"], cwd=outside, env=_clean_env(venv), timeout=60)
    assert version.stdout.strip() == f"streamtasks {streamtasks.__version__}"


def test_assign_runs_a_packaged_scenario_by_name(
    venv: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = _run(["streamtasks", "assign", "sample", "--json"], cwd=outside, env=_clean_env(venv), timeout=60)
    doc = json.loads(done.stdout)
    assert doc["assignor"] == "high_availability"
    assert doc["valid"] is True
    # text-lines has 6 partitions and the topology two subtopologies: 12 tasks, each active once.
    assert sum(len(p["active"]) for p in doc["processes"]) == 12
    # The same as the checkout computes from the same file.
    assert main(["assign", str(ROOT / "streamtasks" / "scenarios" / "sample.yaml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == doc


def test_demo_bounce_starts_the_embedded_kafka_from_the_wheel(venv: Path, outside: Path) -> None:
    missing = kafka_requirements_missing()
    if missing:
        pytest.skip(f"the embedded Apache Kafka cannot start here: {missing}")
    started = time.monotonic()
    done = subprocess.run(
        ["streamtasks", "demo", "--phase", "bounce", "--broker", "kafka"],
        cwd=outside,
        env=_clean_env(venv),
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    print(f"demo --phase bounce from the installed wheel: exit {done.returncode} in {seconds:.0f} s")
    assert done.returncode == 0, output
    assert "broker = Apache Kafka 4.4.0" in done.stderr, output
    assert "result: OK" in done.stdout, output
    assert re.search(r"duplicates 0, lost 0", done.stdout), output


# -- the App on README's first screen -------------------------------------------------------------


def readme_app() -> str:
    """The first ```python block of README.md: the complete App the first screen shows."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    assert match is not None, "README.md has no python block"
    return match.group(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadmeRun:
    counts: dict[bytes, int]
    expected: dict[bytes, int]
    exit_code: int | None
    log: str


def run_readme_app(
    venv: Path, tmp_path: Path, *, admin_bootstrap: str, settings: dict[str, str]
) -> ReadmeRun:
    """Run README's App from the installed wheel with ``settings`` as its ``KAFKA_*`` environment;
    create its topics, produce clicks and read the counts back through ``admin_bootstrap``."""
    script = tmp_path / "click_counter.py"
    script.write_text(readme_app(), encoding="utf-8")
    # TMPDIR: the App's default state directory (<tmp>/streamtasks) is this test's own.
    env = _clean_env(venv, TMPDIR=str(tmp_path), **{f"KAFKA_{k.upper()}": v for k, v in settings.items()})
    asyncio.run(create_topics_async(admin_bootstrap, {"clicks": 3, "click-counts": 3}))
    clicks = [f"user-{i % 7}".encode() for i in range(140)]
    expected = dict(collections.Counter(clicks))
    log_path = tmp_path / "app.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [str(venv / "bin" / "python"), str(script)], cwd=tmp_path, env=env, stdout=log, stderr=log
        )
        try:
            counts = asyncio.run(_produce_and_read_counts(admin_bootstrap, clicks, expected, timeout_s=90.0))
            exit_code = proc.poll()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return ReadmeRun(counts=counts, expected=expected, exit_code=exit_code, log=log_path.read_text())


def test_readme_app_counts_every_click(venv: Path, kafka: Cluster, tmp_path: Path) -> None:
    bootstrap = kafka.bootstrap_servers
    run = run_readme_app(venv, tmp_path, admin_bootstrap=bootstrap, settings={"bootstrap_servers": bootstrap})
    assert run.exit_code is None, f"README's App exited {run.exit_code}:\n{run.log[-3000:]}"
    assert run.counts == run.expected, run.log[-3000:]


def test_readme_app_counts_every_click_on_sasl_ssl(
    venv: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The same App, unchanged, on the secured broker's SASL_SSL listener (SCRAM-SHA-512, the CA
    of the run-time certificate kit) with its settings from the environment; the password is in
    nothing it printed. Needs the secured embedded broker (``secure_kafka``, branch sec-broker)."""
    if importlib.util.find_spec("streamtasks.embedded.secure_cluster") is None:
        pytest.skip("the secured embedded broker (streamtasks.embedded.secure_cluster) is not on this branch")
    cluster = request.getfixturevalue("secure_kafka")
    settings = cluster.settings("admin", "SCRAM-SHA-512")
    password = settings["sasl_plain_password"].get_secret_value()
    env = {
        "bootstrap_servers": cluster.sasl_ssl_bootstrap,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "admin",
        "sasl_plain_password": password,
        "ssl_cafile": str(cluster.certs.ca_cert),
    }
    run = run_readme_app(venv, tmp_path, admin_bootstrap=cluster.plaintext_bootstrap, settings=env)
    assert password not in run.log
    assert run.exit_code is None, f"README's App exited {run.exit_code}:\n{run.log[-3000:]}"
    assert run.counts == run.expected, run.log[-3000:]


async def _produce_and_read_counts(
    bootstrap: str, clicks: list[bytes], expected: dict[bytes, int], *, timeout_s: float
) -> dict[bytes, int]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for user in clicks:
            await producer.send("clicks", key=user, value=b"click")
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer("click-counts", bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    latest: dict[bytes, int] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while latest != expected and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                for record in records:
                    assert record.key is not None
                    assert record.value is not None
                    latest[record.key] = max(latest.get(record.key, 0), int(record.value))
    finally:
        await consumer.stop()
    return latest
