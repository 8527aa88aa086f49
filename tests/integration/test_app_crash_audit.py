"""Stateful app workers under a jittered kill -9 and scale-out, audited per input offset.

Each iteration is one :func:`~streamtasks.drills.crash_audit.run_crash_audit` with its own seed:
fixed seeds when ``CI`` is set, random ones otherwise; every result prints its seed, and
``STREAMTASKS_AUDIT_SEED=<seed>`` replays one. ``STREAMTASKS_AUDIT_ITERATIONS`` sets how many
iterations run (default 2; the closing note of issue 10 gives a 20-iteration run).

The workers' logs (DEBUG) and event lines are kept per seed, in ``STREAMTASKS_DEMO_LOGS`` when
it is set, else in the test's temporary directory; a failure prints the audit's account of the
lost partition (``crash_audit.explain_loss``) and the last lines of every worker's log.
"""

from __future__ import annotations

import asyncio
import io
import os
import random
from pathlib import Path

import pytest

from streamtasks.drills._proc import LOGS_ENV
from streamtasks.drills.crash_audit import run_crash_audit
from streamtasks.embedded import EmbeddedBroker, ExternalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.smoke]


def _seeds() -> list[int]:
    if os.environ.get("STREAMTASKS_AUDIT_SEED"):
        return [int(os.environ["STREAMTASKS_AUDIT_SEED"])]
    n = int(os.environ.get("STREAMTASKS_AUDIT_ITERATIONS", "2"))
    base = 10_000 if os.environ.get("CI") else random.randrange(1_000_000)
    return [base + i for i in range(n)]


def _log_tails(log_dir: Path, lines: int = 40) -> str:
    tails = []
    for log in sorted(log_dir.glob("*.log")):
        text = log.read_text(errors="replace").splitlines()
        tails.append(f"--- last {min(lines, len(text))} lines of {log} ---\n" + "\n".join(text[-lines:]))
    return "\n".join(tails)


def test_every_acknowledged_input_offset_is_processed_across_crash_and_scale_out(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs_root = Path(os.environ.get(LOGS_ENV) or tmp_path)
    results = []
    for seed in _seeds():
        log_dir = logs_root / f"seed-{seed}"
        monkeypatch.setenv(LOGS_ENV, str(log_dir))
        out = io.StringIO()
        report = asyncio.run(run_crash_audit(kafka.bootstrap_servers, out, seed=seed))
        print(out.getvalue())
        results.append(report)
        assert report.offsets.acknowledged > 1_000, report.line()
        assert report.ok, (
            f"{report.line()} (replay: STREAMTASKS_AUDIT_SEED={seed}; worker logs in {log_dir})\n"
            f"{out.getvalue()}\n{_log_tails(log_dir)}"
        )
    print("\n".join(r.line() for r in results))
