"""Stateful app workers under a jittered kill -9 and scale-out, audited per input offset.

Each iteration is one :func:`~streamtasks.drills.crash_audit.run_crash_audit` with its own seed:
fixed seeds when ``CI`` is set, random ones otherwise; every result prints its seed, and
``STREAMTASKS_AUDIT_SEED=<seed>`` replays one. ``STREAMTASKS_AUDIT_ITERATIONS`` sets how many
iterations run (default 2; the closing note of issue 10 gives a 20-iteration run).
"""

from __future__ import annotations

import asyncio
import io
import os
import random

import pytest

from streamtasks.drills.crash_audit import run_crash_audit
from streamtasks.embedded import EmbeddedBroker, ExternalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.smoke]


def _seeds() -> list[int]:
    if os.environ.get("STREAMTASKS_AUDIT_SEED"):
        return [int(os.environ["STREAMTASKS_AUDIT_SEED"])]
    n = int(os.environ.get("STREAMTASKS_AUDIT_ITERATIONS", "2"))
    base = 10_000 if os.environ.get("CI") else random.randrange(1_000_000)
    return [base + i for i in range(n)]


def test_every_acknowledged_input_offset_is_processed_across_crash_and_scale_out(
    kafka: EmbeddedBroker | ExternalCluster,
) -> None:
    results = []
    for seed in _seeds():
        out = io.StringIO()
        report = asyncio.run(run_crash_audit(kafka.bootstrap_servers, out, seed=seed))
        print(out.getvalue())
        results.append(report)
        assert report.offsets.acknowledged > 1_000, report.line()
        assert report.ok, f"{report.line()} (replay: STREAMTASKS_AUDIT_SEED={seed})\n{out.getvalue()}"
    print("\n".join(r.line() for r in results))
