"""``streamtasks.App`` over KIP-848 (``group_protocol="consumer"``) on ``streamtasks coordinator``
in front of the test cluster: the app's streams assignor runs client-side (PrepareAssignment ->
assign -> InstallAssignment), places actives, standbys and warm-ups; a kill -9 promotes the
standbys, a fresh worker's caught-up warm-up asks for a new assignment through the heartbeat's
reason and takes its task over; nothing acknowledged is lost (the demo's stateful phase, smaller)."""

from __future__ import annotations

import asyncio
import io

import pytest

from streamtasks.drills.coordinator_proc import CoordinatorProcess
from streamtasks.drills.stateful_demo import StatefulReport, run_stateful_phase
from streamtasks.embedded import Cluster

pytestmark = pytest.mark.integration


def test_app_tasks_standbys_and_warmups_are_placed_client_side_over_kip848(kafka: Cluster) -> None:
    out = io.StringIO()

    async def run() -> tuple[StatefulReport, CoordinatorProcess]:
        coordinator = CoordinatorProcess(kafka.bootstrap_servers, status_interval_s=0.5)
        address = await coordinator.start()
        try:
            report = await run_stateful_phase(
                kafka.bootstrap_servers,
                out,
                partitions=4,
                keys=200,
                rate=300,
                group_bootstrap=address,
                group_protocol="consumer",
            )
            await asyncio.sleep(1.0)  # one more status line
        finally:
            await coordinator.stop()
        return report, coordinator

    report, coordinator = asyncio.run(run())
    print(out.getvalue())
    assert report.problems == [], out.getvalue()
    assert report.keys == 200
    assert report.latest_mismatches == 0
    assert report.missing_counts == 0
    assert report.offsets is not None
    assert report.offsets.lost == 0, report.offsets.lost_runs
    assert report.offsets.acknowledged > 0
    # The standbys the assignor placed were promoted after the kill: a small restore, if any.
    assert report.promoted_tasks >= 1
    assert report.crash_restored_records < report.crash_full_restore_records / 2
    # The fresh worker got warm-ups, triggered once caught up, and became active.
    assert report.warmups >= 1
    assert report.lag_triggers >= 1
    assert report.moved_to_new >= 1
    # Every assignment was computed by a member (client-side) and installed on the server.
    assert coordinator.counter("prepares") >= 3, coordinator.status()
    assert coordinator.counter("installs") >= 3, coordinator.status()
