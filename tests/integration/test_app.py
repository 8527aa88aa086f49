"""Stateful apps on a real broker: the wordcount example, and a crash with standbys followed by
a scale-out with warm-ups (the demo's stateful phase, smaller)."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType

import pytest

from streamtasks.drills.stateful_demo import run_stateful_phase
from streamtasks.embedded import EmbeddedBroker, ExternalCluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "wordcount_example", ROOT / "examples/wordcount/wordcount.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_wordcount_example_counts_every_word_exactly(kafka: EmbeddedBroker | ExternalCluster) -> None:
    example = _load_example()
    status = asyncio.run(example.main(kafka.bootstrap_servers, repeat=20, timeout_s=90.0))
    assert status == 0


def test_crash_promotes_standbys_and_warmups_take_over(kafka: EmbeddedBroker | ExternalCluster) -> None:
    out = io.StringIO()
    report = asyncio.run(run_stateful_phase(kafka.bootstrap_servers, out, partitions=4, keys=200, rate=300))
    print(out.getvalue())
    assert report.problems == [], out.getvalue()
    # Idempotent store: exactly the last value produced for every key, even after kill -9.
    assert report.keys == 200
    assert report.latest_mismatches == 0
    # Counting store: nothing lost; duplicates bounded by what one commit interval (0.5 s) plus
    # failure detection can replay at 300 records/s.
    assert report.missing_counts == 0
    assert report.duplicate_counts <= 300 * 8
    # The standby made the restore after the crash far smaller than a restore from scratch.
    assert report.promoted_tasks >= 1
    assert report.crash_restored_records < report.crash_full_restore_records / 2
    # The fresh worker got warm-ups, asked for a rebalance once caught up, and became active.
    assert report.warmups >= 1
    assert report.lag_triggers >= 1
    assert report.moved_to_new >= 1
    # Cooperative: tasks that stayed on the old worker were never closed, rebuilt or recycled.
    assert report.kept_tasks >= 1
    assert report.kept_task_restarts == 0
