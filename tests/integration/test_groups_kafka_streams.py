"""``streamtasks groups describe`` of a Java Kafka Streams app's classic group: each member's
tasks and process id decoded from Kafka Streams' own SubscriptionInfo / AssignmentInfo
(``java/windowkey/WindowCounts.java``, kafka-streams 4.4.0 from Maven Central through
``java/oracle/pom.xml``, compiled at first use as the oracle's programs are; it runs until it
has seen the records it is told to wait for, here more than it ever gets, and is killed after
the describe)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from streamtasks.embedded import Cluster, EmbeddedBroker
from tests.integration.test_groups import _groups
from tests.integration.test_window_kafka_streams import SOURCE
from tests.oracle import ORACLE_POM

pytestmark = pytest.mark.integration

WAIT_S = 90


def _program() -> list[str]:
    from streamtasks.embedded.java import JavaUnavailable, compiled_program
    from streamtasks.embedded.kafka_broker import kafka_classpath
    from streamtasks.errors import BrokerError

    try:
        return compiled_program(SOURCE, kafka_classpath(ORACLE_POM), cache="java-windowcounts").command()
    except (JavaUnavailable, BrokerError) as exc:  # pragma: no cover - no JDK, or no Maven
        pytest.skip(f"Kafka Streams cannot run here: {exc}")


def test_a_kafka_streams_app_group_shows_its_tasks_from_kafka_streams_userdata(
    kafka: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip("Tansu's DescribeGroups carries no member assignment; run with STREAMTASKS_BROKER=kafka")
    command = _program()
    app = f"ks-groups-{uuid.uuid4().hex[:6]}"
    topic = f"{app}-in"
    kafka.create_topics({topic: 2})
    proc = subprocess.Popen(
        [*command, kafka.bootstrap_servers, app, topic, str(10**9), str(tmp_path / "kafka-streams")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    document: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            code, out, err = _groups(capsys, kafka, "describe", app, "--members", "--json")
            document = json.loads(out) if code == 0 else {}
            members = document.get("members") or []
            if document.get("state") == "Stable" and members and all(m["tasks"] for m in members):
                break
            assert proc.poll() is None, "the Kafka Streams app exited early"
            assert time.monotonic() < deadline, (code, out, err)
            time.sleep(1)
        code, table, err = _groups(capsys, kafka, "describe", app, "--members")
        assert code == 0, err
    finally:
        proc.kill()
        proc.wait(30)
        assert proc.stderr is not None
        proc.stderr.close()
    print(table)
    assert document["protocol"] == "stream"
    (member,) = document["members"]
    assert member["tasks"] == {"active": ["0_0", "0_1"], "standby": [], "warmup": []}
    assert member["partitions"] == [f"{topic}-0", f"{topic}-1"]
    assert str(uuid.UUID(member["process_id"])) == member["process_id"]
    assert member["endpoint"] is None  # no application.server
    assert table.splitlines()[1].split()[-3:] == ["ACTIVE", "STANDBY", "WARMUP"]
