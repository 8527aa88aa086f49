"""The embedded broker: it starts, answers, creates topics other clients see, and dies with us."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient

from streamtasks.embedded import BOOTSTRAP_ENV, EmbeddedBroker, ExternalCluster, TopicSpec, broker_binary
from streamtasks.errors import BrokerError

ROOT = Path(__file__).parent.parent
JOIN_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT = 11, 14, 12, 8

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_broker_answers_group_apis(kafka: EmbeddedBroker | ExternalCluster) -> None:
    host, port = kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
    probe = EmbeddedBroker(host=host, port=int(port))  # reuse the ApiVersions probe, starts nothing
    versions = probe.api_versions()
    for api in (JOIN_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT):
        assert api in versions
    assert versions[JOIN_GROUP][1] >= 5  # static membership needs JoinGroup v5+


def test_created_topics_are_seen_by_another_client(kafka: EmbeddedBroker | ExternalCluster) -> None:
    kafka.create_topics(
        [
            TopicSpec(name="embedded-events", partitions=12),
            TopicSpec(name="embedded-changelog", partitions=3, configs={"cleanup.policy": "compact"}),
        ]
    )
    kafka.create_topics({"embedded-events": 12})  # idempotent by default
    with pytest.raises(BrokerError, match="embedded-events"):
        kafka.create_topics({"embedded-events": 12}, exist_ok=False)
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        described = {t["name"]: t for t in admin.describe_topics(["embedded-events", "embedded-changelog"])}
    finally:
        admin.close()
    assert len(described["embedded-events"]["partitions"]) == 12
    assert len(described["embedded-changelog"]["partitions"]) == 3


@pytest.mark.skipif(bool(os.environ.get(BOOTSTRAP_ENV)), reason="uses its own embedded broker")
def test_stop_ends_the_process_and_frees_the_port() -> None:
    broker = EmbeddedBroker().start()
    pid = broker.pid
    assert pid is not None
    assert _alive(pid)
    broker.stop()
    broker.stop()  # idempotent
    assert not broker.running
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    with pytest.raises(BrokerError):
        broker.api_versions()


@pytest.mark.skipif(bool(os.environ.get(BOOTSTRAP_ENV)), reason="uses its own embedded broker")
def test_broker_dies_with_a_parent_killed_by_sigkill() -> None:
    code = (
        "from streamtasks.embedded import EmbeddedBroker\n"
        "b = EmbeddedBroker().start()\n"
        "print(b.pid, flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    assert _alive(child_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    parent.stdout.close()
    deadline = time.monotonic() + 5
    while _alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child_pid), "the broker outlived its kill -9'd parent"


def test_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMTASKS_TANSU_BIN", "/nonexistent/tansu")
    with pytest.raises(BrokerError, match="STREAMTASKS_TANSU_BIN"):
        broker_binary()


def test_external_cluster_needs_host_and_port() -> None:
    with pytest.raises(BrokerError, match="host:port"):
        ExternalCluster("localhost")
    assert ExternalCluster("127.0.0.1:9092,other:9093").port == 9092
