"""Two Kafka Streams 4.4.0 workers in one streams group on the embedded Apache Kafka 4.4.0,
under a rolling bounce (issue 29, item 4, the Java side).

``java/streams``' ``WordCount`` (exactly_once_v2, an in-memory store, so a task that moves is
restored from its changelog) runs as two JVMs (:mod:`streamtasks.drills.kafka_streams_peer`).
Input is produced with ``acks=all`` in four batches: before the start, then after each step of
the bounce (stop A, restart A, stop B, restart B). Every line holds distinct words, so each
word's final count must equal the number of acknowledged lines holding it: checked on the
output topic and on the changelog, both read ``read_committed``. StreamsGroupDescribe
(streamtasks' codec) shows the members and their tasks after each step: every task of both
subtopologies ran on both processes during the bounce.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from streamtasks.drills.kafka_streams_peer import (
    KafkaStreamsPeer,
    WordCountNames,
    word_count_topology,
)
from streamtasks.drills.mixed_streams import describe_group, latest_values, produce_lines
from streamtasks.embedded import Cluster
from streamtasks.membership.common import Leave
from streamtasks.membership.streams import (
    JoinStreamsGroup,
    MemberState,
    StreamsMember,
    StreamsMemberConfig,
    Task,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    STREAMS_GROUP_HEARTBEAT_API_KEY,
    DescribedStreamsGroup,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    Topology,
)
from streamtasks.protocol.streams_group_codec import (
    decode_streams_heartbeat_response,
    encode_streams_heartbeat_request,
)
from streamtasks.runtime.connection import GroupCoordinatorClient
from streamtasks.runtime.consumer_driver import new_member_id
from tests.integration.test_streams_member_live import LiveMember, now_ms, until

pytestmark = pytest.mark.integration

PARTITIONS = 4
VOCABULARY = [f"w{i:02d}" for i in range(40)]
#: subtopology 0 (source -> repartition) and 1 (repartition -> count -> output), 4 tasks each.
ALL_TASKS = frozenset(f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS))


def lines(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.sample(VOCABULARY, rng.randint(1, 5))) for _ in range(n)]


async def produce(bootstrap: str, topic: str, batch: list[str]) -> int:
    """Send ``batch``; the number the broker acknowledged (acks=all)."""
    return len(await produce_lines(bootstrap, topic, batch))


def described_tasks(group: DescribedStreamsGroup) -> dict[str, frozenset[str]]:
    """process id -> the active tasks the broker has it running."""
    out: dict[str, set[str]] = collections.defaultdict(set)
    for m in group.members:
        for t in m.assignment.active_tasks:
            out[m.process_id] |= {f"{t.subtopology_id}_{p}" for p in t.partitions}
    return {pid: frozenset(ts) for pid, ts in out.items()}


def wait_counts(
    bootstrap: str, topic: str, expected: dict[str, int], timeout_s: float = 120
) -> dict[str, int]:
    """The output once it equals ``expected``, or as it is after two minutes."""
    deadline = time.monotonic() + 120
    while True:
        seen = asyncio.run(latest_values(bootstrap, topic))
        if seen == expected or time.monotonic() > deadline:
            return seen
        time.sleep(1)


def test_two_kafka_streams_workers_count_every_acknowledged_word_through_a_rolling_bounce(
    ks_kafka: Cluster, tmp_path: Path
) -> None:
    bootstrap = ks_kafka.bootstrap_servers
    app = f"ks-wc-{uuid.uuid4().hex[:8]}"
    names = WordCountNames(application_id=app, input_topic=f"{app}-words", output_topic=f"{app}-counts")
    ks_kafka.create_topics({names.input_topic: PARTITIONS, names.output_topic: PARTITIONS})
    rng = random.Random(29)
    acked: list[str] = []

    def send(n: int) -> None:
        batch = lines(rng, n)
        assert asyncio.run(produce(bootstrap, names.input_topic, batch)) == n
        acked.extend(batch)

    def everything(*peers: KafkaStreamsPeer) -> bool:
        return all(p.running for p in peers) and frozenset().union(*(p.active for p in peers)) == ALL_TASKS

    restored: list[tuple[str, int, int]] = []  # every restore any JVM finished
    send(200)
    peers = {
        "a": KafkaStreamsPeer.start(names, bootstrap=bootstrap, state_dir=tmp_path / "a"),
        "b": KafkaStreamsPeer.start(names, bootstrap=bootstrap, state_dir=tmp_path / "b"),
    }
    ran_on: dict[str, set[str]] = collections.defaultdict(set)  # task -> processes (describe)
    snapshots: list[dict[str, frozenset[str]]] = []

    def settle(*up: KafkaStreamsPeer) -> None:
        deadline = time.monotonic() + 120
        while True:
            try:
                up[0].wait_for(lambda _: everything(*up) and all(p.active for p in up), timeout_s=5)
                tasks = described_tasks(asyncio.run(describe_group(bootstrap, app)))
                if frozenset().union(*tasks.values()) == ALL_TASKS and len(tasks) == len(up):
                    break
            except Exception:
                if time.monotonic() > deadline:
                    raise
            assert time.monotonic() < deadline, [p.tail() for p in up]
            time.sleep(0.5)
        snapshots.append(tasks)
        for pid, ts in tasks.items():
            for t in ts:
                ran_on[t].add(pid)

    try:
        settle(peers["a"], peers["b"])
        send(200)
        assert peers["a"].stop()
        restored += peers["a"].restored
        settle(peers["b"])
        send(200)
        peers["a"] = KafkaStreamsPeer.start(names, bootstrap=bootstrap, state_dir=tmp_path / "a")
        settle(peers["a"], peers["b"])
        send(200)
        assert peers["b"].stop()
        restored += peers["b"].restored
        settle(peers["a"])
        send(200)
        peers["b"] = KafkaStreamsPeer.start(names, bootstrap=bootstrap, state_dir=tmp_path / "b")
        settle(peers["a"], peers["b"])
        send(200)
        expected = dict(collections.Counter(w for line in acked for w in set(line.split())))
        output = wait_counts(bootstrap, names.output_topic, expected)
        changelog = asyncio.run(latest_values(bootstrap, names.changelog_topic))
        final = asyncio.run(describe_group(bootstrap, app))
    finally:
        for p in peers.values():
            p.stop()
    restored += [r for p in peers.values() for r in p.restored]
    assert not [e for p in peers.values() for e in p.errors()]
    # in-memory stores: a moved counting task restores its changelog partition, with records
    assert {topic for topic, _, _ in restored} == {names.changelog_topic}
    assert {part for _, part, n in restored if n > 0} == set(range(PARTITIONS))
    assert output == expected, {w: (output.get(w), n) for w, n in expected.items() if output.get(w) != n}
    assert changelog == expected
    moved = sorted(t for t, pids in ran_on.items() if len(pids) > 1)
    assert moved == sorted(ALL_TASKS), snapshots  # every task ran on two processes in turn
    assert final.topology is not None
    assert final.topology.subtopologies is not None
    topics = {t.name for s in final.topology.subtopologies for t in s.state_changelog_topics}
    topics |= {t.name for s in final.topology.subtopologies for t in s.repartition_source_topics}
    assert topics == {names.changelog_topic, names.repartition_topic}
    print(f"\ndescribed topology: {final.topology}")
    print(
        f"Kafka Streams word count, rolling bounce of 2 JVMs: {len(acked)} acknowledged lines, "
        f"{sum(expected.values())} words, {len(expected)} distinct; output and changelog exact; "
        f"{len(snapshots)} describes, tasks moved: {len(moved)}; {len(restored)} restores, "
        f"{sum(n for _, _, n in restored)} records restored; topology epoch "
        f"{[m.topology_epoch for m in final.members]}, assignor {final.assignor_name}"
    )


async def python_member_visits(
    bootstrap: str, names: WordCountNames, topology: Topology, java: KafkaStreamsPeer
) -> dict[str, Any]:
    """A StreamsMember with ``topology`` joins the Java worker's group, holds the tasks the
    broker gives it (processing nothing) until Java has given them up, then leaves."""
    shared: dict[Task, str] = {}
    member = LiveMember(bootstrap, names.application_id, names.input_topic, shared)
    member.member = StreamsMember(
        StreamsMemberConfig(
            group_id=names.application_id,
            member_id=member.name,
            process_id=str(uuid.uuid4()),
            topology=topology,
            rebalance_timeout_ms=10_000,
        )
    )
    found: dict[str, Any] = {"member": member}
    try:
        await member.run(member.member.handle(JoinStreamsGroup(), now_ms()))

        def shared_out() -> bool:
            if member.member.state is MemberState.FATAL or any(e.fatal for e in member.errors):
                return True
            ours = {f"{s}_{p}" for s, p in member.active}
            return member.stable and bool(ours) and not (ours & java.active) and java.running

        await until([member], shared_out)
        found["python"] = frozenset(f"{s}_{p}" for s, p in member.active)
        found["java"] = java.active
        found["described"] = await describe_group(bootstrap, names.application_id)
        if member.member.state is not MemberState.FATAL:
            await member.run(member.member.handle(Leave(), now_ms()))
            await until([member], lambda: member.member.state is MemberState.UNSUBSCRIBED)
    finally:
        await member.client.close()
    return found


async def join_answer(bootstrap: str, group: str, topology: Topology) -> StreamsGroupHeartbeatResponse:
    """The broker's answer to one joining heartbeat declaring ``topology`` (no leave needed
    where it is refused)."""
    client = GroupCoordinatorClient(bootstrap, group)
    request = StreamsGroupHeartbeatRequest(
        group_id=group,
        member_id=new_member_id(),
        member_epoch=0,
        rebalance_timeout_ms=10_000,
        topology=topology,
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
        process_id=str(uuid.uuid4()),
        client_tags=(),
        task_offsets=(),
        task_end_offsets=(),
    )
    try:
        await client.ensure_coordinator()
        raw = await client.send_raw(
            STREAMS_GROUP_HEARTBEAT_API_KEY, 1, encode_streams_heartbeat_request(request, 1), timeout_s=10
        )
    finally:
        await client.close()
    return decode_streams_heartbeat_response(raw, 1)


def counting(topology: Topology, **changes: Any) -> Topology:
    """``topology`` with its counting subtopology (``"1"``) changed."""
    source, count = topology.subtopologies
    return dataclasses.replace(topology, subtopologies=(source, dataclasses.replace(count, **changes)))


def test_a_streamtasks_member_shares_the_kafka_streams_group(ks_kafka: Cluster, tmp_path: Path) -> None:
    bootstrap = ks_kafka.bootstrap_servers
    app = f"ks-py-{uuid.uuid4().hex[:8]}"
    names = WordCountNames(application_id=app, input_topic=f"{app}-words", output_topic=f"{app}-counts")
    ks_kafka.create_topics({names.input_topic: PARTITIONS, names.output_topic: PARTITIONS})
    rng = random.Random(30)
    acked = lines(rng, 100)
    assert asyncio.run(produce(bootstrap, names.input_topic, acked)) == len(acked)
    java = KafkaStreamsPeer.start(names, bootstrap=bootstrap, state_dir=tmp_path / "java")
    try:
        java.wait_for(lambda p: p.running and p.active == ALL_TASKS, timeout_s=120)
        found = asyncio.run(python_member_visits(bootstrap, names, word_count_topology(names), java))
        member = found["member"]
        assert not [e for e in member.errors if e.fatal], member.errors
        assert member.member.state is MemberState.UNSUBSCRIBED
        described = found["described"]
        epochs = {m.process_id: m.topology_epoch for m in described.members}
        assert len(epochs) == 2, described
        assert set(epochs.values()) == {0}
        assert found["python"], "the broker gave the streamtasks member tasks"
        assert found["python"].isdisjoint(found["java"])
        more = lines(rng, 100)  # produced after the Python member left: Java takes every task back
        assert asyncio.run(produce(bootstrap, names.input_topic, more)) == len(more)
        acked += more
        java.wait_for(lambda p: p.running and p.active == ALL_TASKS, timeout_s=120)
        expected = dict(collections.Counter(w for line in acked for w in set(line.split())))
        output = wait_counts(bootstrap, names.output_topic, expected)
        # The broker compares a joining member's topology with the group's field by field:
        # declared partition counts, and the configs' order, must be Kafka Streams' own.
        declared = word_count_topology(names)
        (changelog,) = declared.subtopologies[1].state_changelog_topics
        (repartition,) = declared.subtopologies[1].repartition_source_topics
        variants = {
            "changelog partitions 4": counting(
                declared, state_changelog_topics=(dataclasses.replace(changelog, partitions=4),)
            ),
            "repartition partitions 4": counting(
                declared, repartition_source_topics=(dataclasses.replace(repartition, partitions=4),)
            ),
            "configs reordered": counting(
                declared,
                state_changelog_topics=(
                    dataclasses.replace(changelog, topic_configs=changelog.topic_configs[::-1]),
                ),
            ),
            # what the App declared before it declared Kafka Streams' values: replication
            # factor 0, the changelog's cleanup.policy only, no repartition configs
            "the App's former declaration": counting(
                declared,
                state_changelog_topics=(
                    dataclasses.replace(
                        changelog, replication_factor=0, topic_configs=changelog.topic_configs[:1]
                    ),
                ),
                repartition_source_topics=(
                    dataclasses.replace(repartition, replication_factor=0, topic_configs=()),
                ),
            ),
        }
        refused = {k: asyncio.run(join_answer(bootstrap, app, t)) for k, t in variants.items()}
    finally:
        assert java.stop()
    changelog_refused = refused.pop("changelog partitions 4")
    assert changelog_refused.error is KafkaErrorCode.STREAMS_INVALID_TOPOLOGY, changelog_refused
    assert "must have an undefined partition count" in (changelog_refused.error_message or "")
    for answer in refused.values():  # a valid topology, but not the group's
        assert answer.error is KafkaErrorCode.INVALID_REQUEST, answer
        assert answer.error_message == "Topology updates are not supported yet."
    assert output == expected
    reports = sorted({e.reason for e in member.errors})  # a STALE_TOPOLOGY status would be here
    assert not [r for r in reports if "TOPOLOGY" in r.upper() or "PARTITIONED" in r.upper()], reports
    print(
        f"\nstreamtasks StreamsMember in the Kafka Streams group: got {sorted(found['python'])}, "
        f"Java kept {sorted(found['java'])}; topology epochs {epochs}; error reports {reports}"
    )
