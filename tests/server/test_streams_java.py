"""Kafka Streams 4.4.0's own Java client (``java/streams``' word count, ``group.protocol=streams``)
bootstrapped to ``streamtasks coordinator`` in front of the embedded Apache Kafka: it runs
unchanged with ``exactly_once_v2`` (its TxnOffsetCommits checked by the coordinator and forwarded
to the cluster: docs/coordinator.md, "Exactly-once"), the coordinator creates its repartition and
changelog topics as Kafka's broker does, its tasks appear in StreamsGroupDescribe through the
coordinator with streamtasks' assignor, and every acknowledged word is counted exactly once in
the read_committed output."""

from __future__ import annotations

import asyncio
import collections
import random
import re
import time
import uuid
from pathlib import Path

import pytest

from streamtasks.drills.kafka_streams_peer import KafkaStreamsPeer, WordCountNames, word_count_program
from streamtasks.drills.mixed_streams import describe_group as describe
from streamtasks.drills.mixed_streams import latest_values as latest
from streamtasks.embedded import Cluster
from streamtasks.embedded.java import JavaUnavailable
from tests.drills.test_kafka_streams_peer import ALL_TASKS, PARTITIONS, described_tasks, lines, produce
from tests.server.support import FAST, ServerProcess

pytestmark = pytest.mark.integration


def test_a_kafka_streams_java_worker_runs_unchanged_on_the_coordinator(
    kafka: Cluster, tmp_path: Path
) -> None:
    try:
        word_count_program()
    except JavaUnavailable as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"Kafka Streams cannot run here: {exc}")
    app = f"ks-coord-{uuid.uuid4().hex[:8]}"
    names = WordCountNames(application_id=app, input_topic=f"{app}-words", output_topic=f"{app}-counts")
    kafka.create_topics({names.input_topic: PARTITIONS, names.output_topic: PARTITIONS})
    rng = random.Random(36)
    batch = lines(rng, 300)
    assert asyncio.run(produce(kafka.bootstrap_servers, names.input_topic, batch)) == len(batch)
    expected = dict(collections.Counter(w for line in batch for w in set(line.split())))
    server = ServerProcess(kafka.bootstrap_servers, extra=(*FAST, "--streams-assignor", "sticky")).start()
    peer: KafkaStreamsPeer | None = None
    try:
        peer = KafkaStreamsPeer.start(
            names, bootstrap=server.address, state_dir=tmp_path / "a", guarantee="exactly_once_v2"
        )
        peer.wait_for(lambda p: p.running and p.active == ALL_TASKS, timeout_s=60)
        described = asyncio.run(describe(server.address, app))
        deadline = time.monotonic() + 40
        counts: dict[str, int] = {}
        while time.monotonic() < deadline:
            counts = asyncio.run(latest(kafka.bootstrap_servers, names.output_topic))
            if all(counts.get(w, 0) >= n for w, n in expected.items()):
                break
    finally:
        if peer is not None:
            peer.stop()
        server.stop()
    print("\n".join(line for line in server.lines if not line.startswith("status:")))
    print(server.status())
    assert peer.errors() == [], peer.tail()
    assert described_tasks(described)
    assert frozenset().union(*described_tasks(described).values()) == ALL_TASKS
    assert described.assignor_name == "sticky"
    # the repartition topic and the changelog, created by the coordinator (the JVM waits for them)
    created = re.search(r"internal_topics_created=(\d+)", server.status())
    assert created is not None, server.status()
    assert int(created.group(1)) >= 2, server.status()
    assert len(described.members) == 1
    wrong = {w: (counts.get(w), n) for w, n in expected.items() if counts.get(w, 0) != n}
    assert wrong == {}  # exactly once: no count short, none run ahead
    txn_commits = re.search(r"txn_commits=(\d+)", server.status())
    assert txn_commits is not None, server.status()
    assert int(txn_commits.group(1)) > 0, server.status()
    print(
        f"Kafka Streams on streamtasks coordinator: {len(batch)} lines, {sum(expected.values())} words, "
        f"{len(expected)} distinct, every count exact; described tasks {sorted(ALL_TASKS)}"
    )
