"""``streamtasks groups list | describe`` on a live broker: a classic group of streamtasks
Consumers, an App group (tasks per member from streamtasks' userdata), a KIP-848 group, and a
group that does not exist. The command runs in-process through ``streamtasks.cli.main``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from streamtasks.cli import main
from streamtasks.embedded import Cluster, EmbeddedBroker, client_settings
from streamtasks.protocol.consumer_group import CONSUMER_GROUP_HEARTBEAT_API_KEY
from tests.integration.harness import Audit, StreamtasksWorker, stable, wait_until
from topology import TopicPartition

pytestmark = pytest.mark.integration

WAIT_S = 60
#: What Tansu 0.6 answers (seen with these tests, STREAMTASKS_BROKER=tansu; docs/operations.md).
TANSU_SKIP = (
    "Tansu's ListGroups v5 leaves out a group with a member, its DescribeGroups names no protocol and no "
    "member's client id, host or assignment, and answers a group id it does not know as Empty (Apache "
    "Kafka: Dead); run with STREAMTASKS_BROKER=kafka"
)


@pytest.fixture
def described(kafka: Cluster) -> Cluster:
    """The test cluster, or a skip where DescribeGroups does not describe members."""
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip(TANSU_SKIP)
    return kafka


def _groups(capsys: pytest.CaptureFixture[str], kafka: Cluster, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["groups", *args, "--bootstrap-servers", kafka.bootstrap_servers])
    out, err = capsys.readouterr()
    return code, out, err


async def _describe_until(
    capsys: pytest.CaptureFixture[str],
    kafka: Cluster,
    group: str,
    done: Callable[[dict[str, Any]], bool],
    what: str,
) -> dict[str, Any]:
    """``groups describe GROUP --json`` until ``done`` holds of its document (while members
    still join, it answers a rebalancing group)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        code, out, err = await asyncio.to_thread(_groups, capsys, kafka, "describe", group, "--json")
        document: dict[str, Any] = json.loads(out) if code == 0 else {}
        if code == 0 and done(document):
            print(out)
            return document
        if loop.time() > deadline:
            raise AssertionError(f"{what}: last answer {code} {out} {err}")
        await asyncio.sleep(0.5)


def _topic(kafka: Cluster, prefix: str, partitions: int) -> tuple[str, set[TopicPartition]]:
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kafka.create_topics({topic: partitions})
    return topic, {TopicPartition(topic, p) for p in range(partitions)}


def _consumers(
    kafka: Cluster, prefix: str, partitions: int, names: tuple[str, ...], **extra: Any
) -> tuple[str, set[TopicPartition], Audit, list[StreamtasksWorker]]:
    """A topic, and streamtasks Consumers (client ids ``names``) for its group ``g-TOPIC``."""
    topic, tps = _topic(kafka, prefix, partitions)
    group = f"g-{topic}"
    audit = Audit(tps)
    settings = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "group_id": group,
        **client_settings(kafka),
        **extra,
    }
    return group, tps, audit, [StreamtasksWorker(n, audit, topic, client_id=n, **settings) for n in names]


def _all_partitions(document: dict[str, Any], key: str = "partitions") -> list[str]:
    return sorted(tp for m in document["members"] for tp in m[key])


def test_classic_consumers_are_listed_and_described_with_their_partitions(
    described: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    kafka = described
    group, partitions, audit, workers = _consumers(kafka, "groups-classic", 4, ("w1", "w2"))

    async def scenario() -> dict[str, Any]:
        try:
            for w in workers:
                await w.start()
            await wait_until(
                stable(audit, partitions, {"w1", "w2"}), WAIT_S, "two members to share the partitions"
            )
            return await _describe_until(
                capsys, kafka, group,
                lambda d: d["state"] == "Stable" and len(_all_partitions(d)) == 4, "a stable group of two",
            )  # fmt: skip
        finally:
            for w in workers:
                await w.stop()

    document = asyncio.run(scenario())
    assert document["type"] == "classic"
    assert document["protocol_type"] == "consumer"
    assert sorted(m["client_id"] for m in document["members"]) == ["w1", "w2"]
    assert _all_partitions(document) == sorted(str(tp) for tp in partitions)
    assert all(m["tasks"] is None for m in document["members"])

    code, out, _ = _groups(capsys, kafka, "list", "--json")
    assert code == 0
    listed = {g["group_id"]: g for g in json.loads(out)}
    assert listed[group]["type"] == "classic"
    assert listed[group]["protocol_type"] == "consumer"
    code, table, _ = _groups(capsys, kafka, "list")
    print(table)
    assert code == 0
    assert table.splitlines()[0].split() == ["GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"]
    assert [group, "classic", "consumer"] in [line.split()[:3] for line in table.splitlines()]


def test_an_app_group_shows_each_members_active_and_standby_tasks(
    described: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    kafka = described
    from streamtasks.drills.stateful_app import make_app

    topic, _ = _topic(kafka, "groups-app", 4)
    settings = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "session_timeout_ms": 6_000,
        "heartbeat_interval_ms": 500,
        "rebalance_timeout_ms": 10_000,
        "num_standby_replicas": 1,
        **client_settings(kafka),
    }

    def tasks_settled(d: dict[str, Any]) -> bool:
        if d["state"] != "Stable" or len(d["members"]) != 2 or any(m["tasks"] is None for m in d["members"]):
            return False
        return sorted(t for m in d["members"] for t in m["tasks"]["active"]) == ["0_0", "0_1", "0_2", "0_3"]

    async def scenario() -> tuple[dict[str, Any], str]:
        apps = [
            make_app(topic, topic, {**settings, "state_dir": str(tmp_path / n), "client_id": n})
            for n in ("a", "b")
        ]
        runners = []
        try:
            for app in apps:
                await app.start()
                runners.append(asyncio.create_task(app.run()))
            for _ in range(10):  # the table of the same Stable generation (a probing rebalance may intervene)
                document = await _describe_until(
                    capsys, kafka, topic, tasks_settled, "two App members with all tasks"
                )
                code, table, err = await asyncio.to_thread(
                    _groups, capsys, kafka, "describe", topic, "--members"
                )
                assert code == 0, err
                if "state Stable" in table.splitlines()[0]:
                    print(table)
                    code, out, err = await asyncio.to_thread(
                        _groups, capsys, kafka, "describe", topic, "--offsets", "--tasks", "--json"
                    )
                    assert code == 0, err
                    offsets: dict[str, Any] = json.loads(out)
                    if offsets["state"] == "Stable":
                        document["task_lags"] = offsets["task_lags"]
                        document["offsets"] = offsets["offsets"]
                        document["by_task"] = offsets["tasks"]
                        return document, table
            raise AssertionError(f"no Stable table: {table}")
        finally:
            for app in apps:
                await app.stop()
            for runner in runners:
                with contextlib.suppress(Exception):
                    await runner

    document, table = asyncio.run(scenario())
    assert document["protocol"] == "streamtasks"
    # --offsets: a row per partition with its owner and task, the lag summed per task
    assert sorted(document["task_lags"]) == ["0_0", "0_1", "0_2", "0_3"]
    assert {(r["partition"], r["task"]) for r in document["offsets"]} == {(p, f"0_{p}") for p in range(4)}
    assert all(r["owner"] in ("a", "b") for r in document["offsets"])
    everything = ["0_0", "0_1", "0_2", "0_3"]
    replicas: list[str] = []
    for member in document["members"]:
        tasks = member["tasks"]
        roles = [tasks["active"], tasks["standby"], tasks["warmup"]]
        assert sum(map(len, roles)) == len({t for role in roles for t in role}), member  # one role per task
        replicas += tasks["standby"] + tasks["warmup"]
        assert member["process_id"]
        # the consumer-protocol partitions are the active tasks' (one source topic)
        assert [tp.rsplit("-", 1)[1] for tp in member["partitions"]] == [
            t.split("_")[1] for t in tasks["active"]
        ]
    # num_standby_replicas=1 on two members: every task has its one replica (a standby, or the
    # high-availability assignor's warm-up that moves it) on the member not running it.
    assert sorted(replicas) == everything
    assert table.splitlines()[1].split()[-3:] == ["ACTIVE", "STANDBY", "WARMUP"]
    for member in document["members"]:
        assert member["member_id"] in table
    # --tasks: a row per task, one member running it active, its replica on the other
    assert [r["task"] for r in document["by_task"]] == everything
    for row in document["by_task"]:
        (runner,) = row["active"]
        assert [*row["standby"], *row["warmup"]] == [{"a": "b", "b": "a"}[runner]], row
        assert row["lag"] == document["task_lags"][row["task"]]


def test_a_kip848_group_shows_epochs_and_current_and_target_assignments(
    kafka: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    if isinstance(kafka, EmbeddedBroker) or CONSUMER_GROUP_HEARTBEAT_API_KEY not in kafka.api_versions():
        pytest.skip("KIP-848 consumer groups need Apache Kafka 4.x (STREAMTASKS_BROKER=kafka)")
    group, partitions, audit, workers = _consumers(
        kafka, "groups-kip848", 4, ("k1", "k2"), group_protocol="consumer"
    )

    async def scenario() -> dict[str, Any]:
        try:
            for w in workers:
                await w.start()
            await wait_until(stable(audit, partitions, {"k1", "k2"}), WAIT_S, "two KIP-848 members")
            document = await _describe_until(
                capsys, kafka, group,
                lambda d: d["state"] == "Stable" and len(_all_partitions(d, "current_assignment")) == 4,
                "a stable consumer group",
            )  # fmt: skip
            code, table, err = await asyncio.to_thread(_groups, capsys, kafka, "describe", group, "--members")
            assert code == 0, err
            print(table)
            assert table.startswith(f"group {group}: consumer (KIP-848), state ")
            return document
        finally:
            for w in workers:
                await w.stop()

    document = asyncio.run(scenario())
    assert document["type"] == "consumer"
    assert document["group_epoch"] >= 2
    assert document["assignment_epoch"] == document["group_epoch"]
    assert _all_partitions(document, "current_assignment") == sorted(str(tp) for tp in partitions)
    for member in document["members"]:
        assert member["current_assignment"] == member["target_assignment"]
        assert member["member_epoch"] == document["assignment_epoch"]


def test_groups_list_shows_a_live_group_with_its_type_and_state(
    described: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    kafka = described
    group, partitions, audit, (worker,) = _consumers(kafka, "groups-list", 2, ("l1",))

    async def scenario() -> dict[str, Any]:
        try:
            await worker.start()
            await wait_until(stable(audit, partitions, {"l1"}), WAIT_S, "the member to own both partitions")
            code, out, err = await asyncio.to_thread(_groups, capsys, kafka, "list", "--json")
            assert code == 0, err
            listed: dict[str, Any] = {g["group_id"]: g for g in json.loads(out)}
            return listed
        finally:
            await worker.stop()

    listed = asyncio.run(scenario())
    assert listed[group] == {
        "group_id": group,
        "type": "classic",
        "protocol_type": "consumer",
        "state": "Stable",
    }


def test_a_group_that_does_not_exist_is_one_line_and_status_2(
    described: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    kafka = described
    group = f"no-such-group-{uuid.uuid4().hex[:6]}"
    code, out, err = _groups(capsys, kafka, "describe", group)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert f"no group {group!r}" in err
