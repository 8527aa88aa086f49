"""The demo's ``streamtasks coordinator`` child process (streamtasks.drills.coordinator_proc)
in front of the test cluster: it reports the address it listens on, serves KIP-848 there (its
ApiVersions advertises ConsumerGroupHeartbeat, whatever the backing cluster serves), writes
status lines, and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from streamtasks.drills._proc import LOGS_ENV
from streamtasks.drills.coordinator_proc import CoordinatorProcess
from streamtasks.embedded import Cluster
from streamtasks.embedded.cluster import api_versions
from streamtasks.protocol.consumer_group import CONSUMER_GROUP_HEARTBEAT_API_KEY
from streamtasks.server import parse_host_port

pytestmark = pytest.mark.integration


def test_the_demo_coordinator_serves_kip848_in_front_of_the_cluster(
    kafka: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "not" / "made" / "yet"  # the drill makes the logs directory it is given
    monkeypatch.setenv(LOGS_ENV, str(logs))

    async def run() -> tuple[str, dict[int, tuple[int, int]], CoordinatorProcess]:
        coordinator = CoordinatorProcess(kafka.bootstrap_servers, status_interval_s=0.5)
        address = await coordinator.start()
        try:
            host, port = parse_host_port(address, "address")
            served = await asyncio.to_thread(api_versions, host, port)
            while not coordinator.status():
                await asyncio.sleep(0.1)
        finally:
            await coordinator.stop()
        return address, served, coordinator

    address, served, coordinator = asyncio.run(run())
    assert address.startswith("127.0.0.1:")
    assert CONSUMER_GROUP_HEARTBEAT_API_KEY in served
    assert coordinator.status().startswith("status: groups=0")
    assert coordinator.counter("prepares") == 0
    assert coordinator.proc is not None
    assert coordinator.proc.returncode == 0
    copied = (logs / "coordinator.log").read_text().splitlines()
    assert copied == coordinator.lines
