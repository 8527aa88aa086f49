"""``streamtasks groups describe --offsets``, ``reset-offsets`` and the describe of a live
streams group (KIP-1071) on Apache Kafka 4.4, and a DEBUG run on the secured broker whose
output holds no password (issue 30, item 3)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from streamtasks.embedded import Cluster
from streamtasks.embedded.secure_cluster import SecuredCluster
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    StreamsGroupHeartbeatRequest,
    Subtopology,
    TaskIds,
    TopicInfo,
    Topology,
)
from streamtasks.runtime.client_file import write_client_config
from streamtasks.runtime.connection import GroupCoordinatorClient
from streamtasks.runtime.consumer_driver import new_member_id
from streamtasks.runtime.security import ClientSettings, make_client_settings
from tests.integration.test_groups import _consumers, _groups, described  # noqa: F401 (a fixture)
from tests.integration.test_streams_group_live import find_coordinator, heartbeat, streams_kafka  # noqa: F401

pytestmark = pytest.mark.integration

WAIT_S = 60
RECORDS = 10


async def _produce(settings: ClientSettings, topic: str, partitions: int, per_partition: int) -> None:
    producer = AIOKafkaProducer(**settings.aiokafka_kwargs())
    await producer.start()
    try:
        for p in range(partitions):
            for i in range(per_partition):
                await producer.send_and_wait(topic, f"v{i}".encode(), key=b"k", partition=p)
    finally:
        await producer.stop()


def _json(capsys: pytest.CaptureFixture[str], kafka: Cluster, *args: str) -> Any:
    code, out, err = _groups(capsys, kafka, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def _committed(document: dict[str, Any]) -> dict[int, int | None]:
    return {r["partition"]: r["committed_offset"] for r in document["offsets"]}


def test_offsets_are_described_and_reset_like_kafka_consumer_groups(
    described: Cluster,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    kafka = described
    group, partitions, _, (worker,) = _consumers(kafka, "groups-offsets", 2, ("o1",))
    topic = next(iter(partitions)).topic
    asyncio.run(_produce(ClientSettings.of(kafka.bootstrap_servers), topic, 2, RECORDS))

    # A group nobody has joined: a dry run commits nothing, --execute does.
    dry = _json(capsys, kafka, "reset-offsets", group, "--topic", topic, "--to-offset", "3")
    assert dry["executed"] is False
    assert [p["new_offset"] for p in dry["partitions"]] == [3, 3]
    code, out, err = _groups(capsys, kafka, "describe", group, "--offsets")
    assert code == 2, (out, err)
    assert f"no group {group!r}" in err
    done = _json(capsys, kafka, "reset-offsets", group, "--topic", topic, "--to-offset", "3", "--execute")
    assert done["executed"] is True
    document = _json(capsys, kafka, "describe", group, "--offsets")
    assert document["state"] == "Empty"
    assert _committed(document) == {0: 3, 1: 3}
    assert [(r["log_end_offset"], r["lag"]) for r in document["offsets"]] == [(RECORDS, 7), (RECORDS, 7)]

    shifted = _json(capsys, kafka, "reset-offsets", group, "--topic", topic, "--shift-by", "-5", "--execute")
    assert [(p["current_offset"], p["new_offset"]) for p in shifted["partitions"]] == [
        (3, 0),
        (3, 0),
    ]  # clamped
    _json(capsys, kafka, "reset-offsets", group, "--topic", topic, "--to-latest", "--execute")
    assert _committed(_json(capsys, kafka, "describe", group, "--offsets")) == {0: RECORDS, 1: RECORDS}
    _json(
        capsys,
        kafka,
        "reset-offsets",
        group,
        "--topic",
        topic,
        "--to-datetime",
        "2001-01-01T00:00:00",
        "--execute",
    )
    assert _committed(_json(capsys, kafka, "describe", group, "--offsets")) == {0: 0, 1: 0}
    code, table, _ = _groups(capsys, kafka, "describe", group, "--offsets")
    print(table)
    assert table.splitlines()[1].split() == [
        "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "OWNER", "TASK",
    ]  # fmt: skip

    async def live() -> tuple[dict[str, Any], tuple[int, str, str]]:
        await worker.start()
        try:
            deadline = time.monotonic() + WAIT_S
            while True:  # the member reads every record and commits
                document = await asyncio.to_thread(_json, capsys, kafka, "describe", group, "--offsets")
                rows = document["offsets"]
                if document["state"] == "Stable" and all(r["lag"] == 0 and r["owner"] == "o1" for r in rows):
                    break
                assert time.monotonic() < deadline, document
                await asyncio.sleep(0.5)
            refused = await asyncio.to_thread(
                _groups, capsys, kafka, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute"
            )
            return document, refused
        finally:
            await worker.stop()

    document, (code, out, err) = asyncio.run(live())
    assert [(r["committed_offset"], r["owner"]) for r in document["offsets"]] == [(RECORDS, "o1")] * 2
    assert code == 2
    assert out == ""
    assert "is Stable: offsets can only be reset while it has no member" in err, err


def test_a_live_streams_group_is_described_with_its_topology_and_tasks(
    streams_kafka: Cluster,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    kafka = streams_kafka
    group = f"groups-streams-{uuid.uuid4().hex[:8]}"
    topic = f"{group}-in"
    kafka.create_topics({topic: 2})
    changelog = f"{group}-store-changelog"

    async def scenario() -> dict[str, Any]:
        client = GroupCoordinatorClient(kafka.bootstrap_servers, group)
        member_id, process_id = new_member_id(), str(uuid.uuid4())
        topology = Topology(
            epoch=0,
            subtopologies=(
                Subtopology(
                    subtopology_id="0",
                    source_topics=(topic,),
                    state_changelog_topics=(TopicInfo(name=changelog, topic_configs=()),),
                ),
            ),
        )
        request = StreamsGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=10_000,
            topology=topology, active_tasks=(), standby_tasks=(), warmup_tasks=(), process_id=process_id,
            client_tags=(), task_offsets=(), task_end_offsets=(),
        )  # fmt: skip
        owned: tuple[TaskIds, ...] = ()
        deadline = time.monotonic() + WAIT_S
        try:
            await find_coordinator(client, deadline)
            while owned != (TaskIds(subtopology_id="0", partitions=(0, 1)),):
                response = await heartbeat(client, request, 1)
                assert response.error is KafkaErrorCode.NONE or response.error.retriable, response
                assert time.monotonic() < deadline, response
                if response.active_tasks is not None:
                    owned = response.active_tasks
                await asyncio.sleep(0.5)
                request = StreamsGroupHeartbeatRequest(
                    group_id=group, member_id=member_id, member_epoch=max(response.member_epoch, 0),
                    active_tasks=owned, standby_tasks=(), warmup_tasks=(),
                )  # fmt: skip
            await heartbeat(client, request, 1)  # report the tasks as owned
            document: dict[str, Any] = await asyncio.to_thread(
                _json, capsys, kafka, "describe", group, "--members", "--offsets"
            )
            code, table, err = await asyncio.to_thread(_groups, capsys, kafka, "describe", group, "--members")
            assert code == 0, err
            print(table)
            assert table.startswith(f"group {group}: streams (KIP-1071), state ")
            await heartbeat(
                client, StreamsGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=-1), 1
            )
            document["member_process"] = process_id
            return document
        finally:
            await client.close()

    document = asyncio.run(scenario())
    assert document["type"] == "streams"
    assert document["group_epoch"] >= 1
    assert document["topology_epoch"] == 0
    (sub,) = document["subtopologies"]
    assert sub["source_topics"] == [topic]
    assert sub["changelog_topics"] == [changelog]
    (member,) = document["members"]
    assert member["process_id"] == document["member_process"]
    assert member["target_assignment"]["active"] == ["0_0", "0_1"]
    assert member["current_assignment"]["active"] == ["0_0", "0_1"]
    # --offsets: each partition of the member's active tasks, its owner and task (nothing committed)
    rows = [(r["partition"], r["task"], r["committed_offset"], r["lag"]) for r in document["offsets"]]
    assert rows == [(0, "0_0", None, 0), (1, "0_1", None, 0)]
    assert {r["owner"] for r in document["offsets"]} == {member["client_id"]}
    assert document["task_lags"] == {"0_0": 0, "0_1": 0}


def test_a_debug_describe_on_the_secured_broker_prints_no_password(
    secure_kafka: SecuredCluster, tmp_path: Path
) -> None:
    settings = make_client_settings(secure_kafka.settings("app", "SCRAM-SHA-512"))
    password = secure_kafka.password("app").get_secret_value()
    config = write_client_config(settings, tmp_path / "client.yaml")
    run = uuid.uuid4().hex[:6]
    topic, group = f"secure-groups-{run}", f"secure-groups-g-{run}"
    host, port = secure_kafka.plaintext_bootstrap.rsplit(":", 1)
    from streamtasks.embedded.cluster import create_topics

    create_topics(host, int(port), {topic: 2})
    asyncio.run(_produce(settings, topic, 2, 3))
    base = [sys.executable, "-m", "streamtasks", "--log-level", "DEBUG", "groups"]
    where = ["--bootstrap-servers", settings.bootstrap_servers, "--client-config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    runs = [
        [*base, "reset-offsets", group, "--topic", topic, "--to-latest", "--execute", *where],
        [*base, "describe", group, "--members", "--offsets", *where],
        [*base, "describe", group, "--offsets", "--json", *where],
        [*base, "list", *where],
    ]
    outputs = [
        subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
        for argv in runs
    ]
    for done in outputs:
        assert done.returncode == 0, done.stderr[-2000:]
        assert password not in done.stdout + done.stderr
    # the run did log at DEBUG, the settings included (their SecretStr masked)
    assert "DEBUG streamtasks.runtime.group_admin: describing group" in outputs[1].stderr
    assert "sasl_plain_password=SecretStr('**********')" in outputs[1].stderr
    document = json.loads(outputs[2].stdout)
    assert [(r["committed_offset"], r["log_end_offset"]) for r in document["offsets"]] == [(3, 3), (3, 3)]
    print(outputs[1].stdout)
