"""Exactly-once v2 with the group on ``streamtasks coordinator``, live (Apache Kafka 4.4.0 behind it).

Two ``App(processing_guarantee="exactly_once_v2")`` workers (KIP-848 members of the server's group)
bootstrapped to the coordinator: their transactions are the cluster's, their TxnOffsetCommits go
to the coordinator, which checks them against its group and forwards them to the cluster's group
coordinator. A ``kill -9`` of one worker while it processes, a fresh worker joining, every
survivor bounced: the per-offset audit of ``tests/integration/test_app_exactly_once.py``
(:func:`~streamtasks.drills.crash_audit.run_crash_audit`) reads the output with
``read_committed`` and every acknowledged input offset must appear there exactly once.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from streamtasks.drills._proc import LOGS_ENV
from streamtasks.drills.crash_audit import run_crash_audit
from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from tests.server.support import ServerProcess, status_count

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = 29_447


def test_an_exactly_once_app_group_on_the_coordinator_outputs_every_input_once_through_a_kill_and_a_bounce(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOGS_ENV, str(tmp_path / "logs"))
    server = ServerProcess(kafka.bootstrap_servers).start()
    out = io.StringIO()
    try:
        report = asyncio.run(
            run_crash_audit(
                server.address,
                out,
                seed=SEED,
                workers=2,
                partitions=4,
                keys=1_000,
                rate=400,
                drain_timeout_s=40.0,
                guarantee="exactly_once_v2",
                bounce=True,
                kill_busy=True,
                group_protocol="consumer",
            )
        )
        print(out.getvalue())
        print(report.line())
        print(server.status())
        assert report.offsets.acknowledged > 1_000, report.line()
        assert report.bounced >= 2, report.line()
        assert report.exactly_once, f"{report.line()} (logs in {tmp_path / 'logs'})"
        assert status_count(server, "txn_commits") > 0, server.status()
        assert status_count(server, "txn_groups") == 1, server.status()
    finally:
        server.stop()
