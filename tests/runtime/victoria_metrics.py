"""A real OTLP receiver for the tests: VictoriaMetrics from Debian's package, fetched on first use.

Debian's Prometheus packages are built without its OTLP receiver (2.42 in bookworm is older than
the receiver; trixie's 2.53 and sid's 3.5 answer an unknown feature flag / 404), so the
receiver is VictoriaMetrics, whose single-node server decodes OTLP/HTTP protobuf at
``/opentelemetry/v1/metrics`` and answers what it stored at ``/api/v1/export``. Its Debian
package (trixie: 1.112) is fetched with ``apt-get download`` from a private package list (no
root, nothing installed system-wide) and extracted with ``dpkg-deb`` into
``$XDG_CACHE_HOME/streamtasks/victoria-metrics/`` (``~/.cache``), like the Kafka broker's jars:
once, then read from the cache. Where apt-get, dpkg-deb or the trixie keyring is missing, or
the download fails, :func:`binary` says why and the tests that need it skip with that reason.

``-opentelemetry.usePrometheusNaming`` names what arrives as Prometheus would: a monotonic sum
gets ``_total`` when its name lacks it (``x_count`` -> ``x_count_total``), a gauge keeps its
name: the kind an instrument was exported as shows in the stored name. Basic authentication
(``-httpAuth.*``) makes the exporter's headers (``OTEL_EXPORTER_OTLP_HEADERS``) necessary.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamtasks.embedded._process import die_with_parent, free_port, log_tail, terminate

__all__ = ["Stored", "VictoriaMetrics", "as_stored", "binary", "differences", "victoria_metrics"]

KEYRING = Path("/usr/share/keyrings/debian-archive-trixie-stable.gpg")
SOURCE = f"deb [signed-by={KEYRING}] http://deb.debian.org/debian trixie main\n"

#: name -> {sorted label pairs (resource attributes dropped): last value}
Stored = dict[str, dict[tuple[tuple[str, str], ...], float]]
RESOURCE_LABELS = frozenset({"service_name", "service_instance_id", "telemetry_sdk_language",
                             "telemetry_sdk_name", "telemetry_sdk_version", "job", "instance"})  # fmt: skip


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "streamtasks" / "victoria-metrics"


@functools.cache
def binary() -> tuple[Path | None, str]:
    """The ``victoria-metrics`` executable (fetched on the first call) or None and why not."""
    root = _cache()
    exe = root / "usr" / "bin" / "victoria-metrics"
    if exe.exists():
        return exe, "cached"
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            return None, f"no {tool} on PATH to fetch Debian's victoria-metrics package"
    if not KEYRING.exists():
        return None, f"no {KEYRING} (debian-archive-keyring) to verify Debian trixie's package list"
    root.mkdir(parents=True, exist_ok=True)
    with open(root.parent / "victoria-metrics.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.exists():
            return exe, "cached"
        apt = root.parent / "victoria-metrics-apt"
        for sub in ("lists/partial", "cache/archives/partial", "download"):
            (apt / sub).mkdir(parents=True, exist_ok=True)
        (apt / "sources.list").write_text(SOURCE)
        options = [
            f"-oDir::Etc::SourceList={apt / 'sources.list'}", "-oDir::Etc::SourceParts=/dev/null",
            f"-oDir::State::Lists={apt / 'lists'}", f"-oDir::Cache={apt / 'cache'}",
            "-oDebug::NoLocking=1", f"-oAPT::Sandbox::User={'root' if os.geteuid() == 0 else ''}",
        ]  # fmt: skip
        try:
            for step in (["update"], ["download", "victoria-metrics"]):
                subprocess.run(["apt-get", *options, *step], cwd=apt / "download", check=True,
                               capture_output=True, text=True, timeout=300)  # fmt: skip
            (deb,) = (apt / "download").glob("victoria-metrics_*.deb")
            subprocess.run(
                ["dpkg-deb", "-x", str(deb), str(root)], check=True, capture_output=True, timeout=120
            )
        except (subprocess.SubprocessError, ValueError, OSError) as exc:
            detail = getattr(exc, "stderr", "") or ""
            return None, f"fetching Debian's victoria-metrics package failed: {exc} {detail[-300:]}"
        shutil.rmtree(apt, ignore_errors=True)  # the package lists and the .deb: not needed again
        for other in exe.parent.iterdir():  # vmagent, vmalert, vmctl...: only the server is used
            if other != exe:
                other.unlink()
    return (exe, "fetched") if exe.exists() else (None, f"the package holds no {exe.relative_to(root)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class VictoriaMetrics:
    """A running receiver: where to export to, the header that authenticates, what it stored."""

    url: str
    authorization: str

    @property
    def otlp_endpoint(self) -> str:
        return f"{self.url}/opentelemetry/v1/metrics"

    def _get(self, path: str) -> bytes:
        request = urllib.request.Request(self.url + path, headers={"Authorization": self.authorization})
        with urllib.request.urlopen(request, timeout=10) as answer:
            body: bytes = answer.read()
            return body

    def stored(self) -> Stored:
        """Every series' last value, by name and labels (resource attributes left out)."""
        self._get("/internal/force_flush")
        out: Stored = {}
        for line in self._get("/api/v1/export?match[]=%7B__name__%21%3D%22%22%7D").splitlines():
            row = json.loads(line)
            labels = {k: v for k, v in row["metric"].items() if k != "__name__" and k not in RESOURCE_LABELS}
            last = max(range(len(row["timestamps"])), key=row["timestamps"].__getitem__)
            out.setdefault(row["metric"]["__name__"], {})[tuple(sorted(labels.items()))] = float(
                row["values"][last]
            )
        return out

    def agreeing(self, expected: Stored, timeout_s: float = 20.0) -> Stored:
        """What it stored once every name of ``expected`` is there with its labels and values
        (12 significant digits: VictoriaMetrics' precision), or at the timeout."""
        return self.wait(lambda stored: differences(stored, expected) == [], timeout_s)

    def wait(self, done: Callable[[Stored], bool], timeout_s: float = 20.0) -> Stored:
        """What it stored once ``done`` holds (it makes new rows searchable within seconds)."""
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.stored()
            if done(got) or time.monotonic() > deadline:
                return got
            time.sleep(0.3)


@contextmanager
def victoria_metrics(
    tmp_path: Path, *, user: str = "otel", password: str, port: int | None = None
) -> Iterator[VictoriaMetrics]:
    """A VictoriaMetrics on ``port`` (a free loopback one) asking basic authentication; skips the test
    when the binary cannot be had (:func:`binary`)."""
    exe, why = binary()
    if exe is None:
        pytest.skip(f"no VictoriaMetrics to receive OTLP: {why}")
    port = free_port("127.0.0.1") if port is None else port
    log = open(tmp_path / "victoria-metrics.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [str(exe), f"-storageDataPath={tmp_path / 'vm-data'}", f"-httpListenAddr=127.0.0.1:{port}",
         "-opentelemetry.usePrometheusNaming", f"-httpAuth.username={user}", f"-httpAuth.password={password}",
         "-retentionPeriod=1d", "-loggerLevel=WARN"],
        stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent,  # noqa: PLW1509 - only sets the parent-death signal
    )  # fmt: skip
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    vm = VictoriaMetrics(url=f"http://127.0.0.1:{port}", authorization=f"Basic {token}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                vm._get("/health")
                break
            except (urllib.error.URLError, OSError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log_tail(tmp_path / "victoria-metrics.log")
                    raise RuntimeError(f"VictoriaMetrics did not start: {tail}") from None
                time.sleep(0.1)
        yield vm
    finally:
        terminate(proc, 10)
        log.close()


def as_stored(exposition: str) -> Stored:
    """A ``/metrics`` text as the receiver stores its OTLP export (module docstring): a counter
    under its ``_total`` sample's name, a histogram's ``_sum`` / ``_count`` as counters
    (``_sum_total``, ``_count_total``), a gauge under its own name."""
    from prometheus_client.parser import text_string_to_metric_families

    out: Stored = {}
    for family in text_string_to_metric_families(exposition):
        for s in family.samples:
            if family.type == "counter" and s.name.endswith("_total"):
                name = s.name
            elif family.type == "histogram" and s.name.endswith(("_sum", "_count")):
                name = s.name + "_total"
            elif family.type == "gauge" and not s.name.endswith("_created"):
                name = s.name  # (the text format types a counter's or histogram's _created a gauge)
            else:
                continue  # _created, _bucket: not exported (streamtasks.runtime.otel)
            out.setdefault(name, {})[tuple(sorted(s.labels.items()))] = float(s.value)
    return out


def differences(got: Stored, expected: Stored) -> list[str]:
    """The names of ``expected`` that ``got`` lacks or holds with other labels or values."""
    out = []
    for name, points in expected.items():
        have = got.get(name)
        same = have is not None and have.keys() == points.keys()
        if not same or any(abs(have[k] - v) > 1e-9 * max(abs(v), 1e-300) for k, v in points.items()):
            out.append(f"{name}: {have} != {points}")
    return out
