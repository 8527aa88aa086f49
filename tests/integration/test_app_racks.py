"""Racks end to end on a real broker (Apache Kafka 4.4.0): four App processes in two zones (the
client tag ``zone`` with ``rack_aware_assignment_tags=["zone"]``, or ``rack``), one standby per
task; once the group settles, every task's standby runs in another zone than its active."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from streamtasks.app import App, ProcessorContext, Record
from streamtasks.embedded import Cluster, client_settings
from streamtasks.runtime.admin import create_topics_async
from streamtasks.state.serdes import INT64, STRING
from topology import TaskId, TopologyBuilder

pytestmark = pytest.mark.integration

ZONES = ("zone-a", "zone-a", "zone-b", "zone-b")


def noop(ctx: ProcessorContext, record: Record) -> None:
    return None


def placement(apps: list[App]) -> tuple[dict[TaskId, str], dict[TaskId, list[str]]]:
    """Each task's active zone and its standbys' zones, as the processes run them."""
    active: dict[TaskId, str] = {}
    standby: dict[TaskId, list[str]] = {}
    for app in apps:
        zone = app.config.client_tags.get("zone") or app.config.rack or "?"
        for task in app.tasks.tasks.values():
            if task.is_active:
                active[task.id] = zone
            else:
                standby.setdefault(task.id, []).append(zone)
    return active, standby


def _placed_by(by: str, zone: str) -> dict[str, Any]:
    if by == "tags":
        return {"client_tags": {"zone": zone}, "rack_aware_assignment_tags": ["zone"]}
    return {"rack": zone}


async def _scenario(
    bootstrap: str, tmp: Path, broker: dict[str, Any], by: str
) -> tuple[dict[TaskId, str], dict[TaskId, list[str]]]:
    app_id = f"racks-{uuid.uuid4().hex[:8]}"
    await create_topics_async(bootstrap, {app_id: 4})
    builder = TopologyBuilder(app_id)
    builder.stream(app_id).store("counts")
    apps = [
        App(
            builder.build(),
            {0: noop},
            stores={"counts": (STRING, INT64)},
            application_id=app_id,
            bootstrap_servers=bootstrap,
            state_dir=str(tmp / str(i)),
            client_id=f"{zone}-{i}",
            num_standby_replicas=1,
            **_placed_by(by, zone),
            session_timeout_ms=6_000,
            heartbeat_interval_ms=300,
            **broker,
        )
        for i, zone in enumerate(ZONES)
    ]
    for app in apps:
        await app.start()
    runners = [asyncio.create_task(app.run()) for app in apps]
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            active, standby = placement(apps)
            settled = all(app.consumer.stable for app in apps)
            if settled and len(active) == 4 and all(len(standby.get(t, [])) == 1 for t in active):
                break
            await asyncio.sleep(0.3)
        return placement(apps)
    finally:
        for app in apps:
            await app.stop()
        await asyncio.gather(*runners, return_exceptions=True)


@pytest.mark.parametrize("by", ["tags", "rack"])
def test_standbys_run_in_another_zone_than_their_actives(kafka: Cluster, tmp_path: Path, by: str) -> None:
    active, standby = asyncio.run(_scenario(kafka.bootstrap_servers, tmp_path, client_settings(kafka), by))
    print({str(t): (active[t], standby.get(t)) for t in sorted(active)})
    assert sorted(active) == [TaskId(0, p) for p in range(4)]
    for task, zone in active.items():
        assert standby[task], (task, zone)
        assert all(z != zone for z in standby[task]), (task, zone, standby[task])
