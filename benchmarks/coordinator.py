"""Speed of the pure KIP-848 coordinator (streamtasks.coordinator): steady-state heartbeats per
second, the time to rebuild a group from its records, and a simulated rolling bounce of a
10,000-member group.

    .venv/bin/python benchmarks/coordinator.py                 # both suites
    .venv/bin/python benchmarks/coordinator.py --suite heartbeats --members 500   # other sizes
    .venv/bin/python benchmarks/coordinator.py --suite bounce  # the rolling bounces only
    .venv/bin/python benchmarks/coordinator.py --suite bounce --only static   # some of them
    .venv/bin/python benchmarks/coordinator.py --json          # rows as JSON

For each size it writes the log of a stable group (10 partitions of one topic per member, every
member at the group epoch owning its target: 3 records per member plus 3), then measures:

* ``replay``: replaying that log into a fresh coordinator (``GroupCoordinator.replay``), CPU time;
* ``load``: ``GroupCoordinator.load`` (replay, rearm every session timer, the resume write), CPU;
* heartbeats per second, one core: ``heartbeat()`` then ``apply()`` for every member in turn,
  with the clock advancing 1 ms per heartbeat, best of three passes over the group, in CPU time
  of this process (``time.process_time``: the machine may be shared). ``lean`` is
  the heartbeat a member sends when nothing changed (epoch only, as Kafka's clients send it);
  ``full`` also carries the member's owned partitions (what a member sends after a change).

The issue's goal is >= 20,000 lean heartbeats/s at 10,000 members. For scale, Apache Kafka's
KIP-848 coordinator serves one group per ``__consumer_offsets`` partition on one thread too,
and KIP-1263 measured its server-side assignor at 15-20 ms for 1,000 members and 50,000
partitions -- the cost streamtasks pays per epoch bump, not per heartbeat.

The ``bounce`` suite (``benchmarks/_bounce.py``) simulates, in discrete events over simulated
time with the real coordinator and well-behaved members (heartbeat every 5 s, acknowledge at
once), a group of 10,000 members on 100,000 partitions (10 topics) that forms and then restarts
every member in 10 waves of 1,000 (each leaves within 1 s, its new process joins 5 s later),
with the server-side ``uniform`` assignor and Kafka's default target batching
(``assignment_interval_ms`` 1,000, KIP-1263); the same with static members (leave with epoch -2,
rejoin with the instance id); and, to show what batching buys, one wave of 100 of a
1,000-member group with and without it. Per wave: simulated time until the group is Stable
again, partitions handed to another owner, records written, epoch bumps, targets computed,
heartbeats, and the coordinator's CPU time; per run: replaying the whole log and its compacted
form (last record per key), checked to rebuild the same group (CPU time), and the run's wall
time (the simulated members included).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._bounce import BounceConfig, BounceRun, WaveStats, run_bounce
from benchmarks._table import format_table
from streamtasks.coordinator import (
    CurrentMemberAssignmentRecord,
    GroupCoordinator,
    GroupEpochRecord,
    MemberMetadataRecord,
    MetadataImage,
    PartitionMetadataRecord,
    Record,
    TargetAssignmentMemberRecord,
    TargetAssignmentMetadataRecord,
    TopicMetadata,
    TopicPartitionSet,
)
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest

SIZES = (100, 1_000, 10_000)
PARTITIONS_PER_MEMBER = 10
GROUP = "bench"
EPOCH = 7
TOPIC = TopicMetadata(topic_id=uuid.UUID(int=0xF00), name="events", num_partitions=0)


def stable_log(members: int) -> tuple[MetadataImage, list[Record], list[str]]:
    topic = TopicMetadata(
        topic_id=TOPIC.topic_id, name=TOPIC.name, num_partitions=members * PARTITIONS_PER_MEMBER
    )
    ids = [str(uuid.UUID(int=i + 1)) for i in range(members)]
    log: list[Record] = [
        GroupEpochRecord(group_id=GROUP, epoch=EPOCH),
        PartitionMetadataRecord(group_id=GROUP, topics=(topic,)),
    ]
    for i, member_id in enumerate(ids):
        owned = TopicPartitionSet(
            {topic.topic_id: range(i * PARTITIONS_PER_MEMBER, (i + 1) * PARTITIONS_PER_MEMBER)}
        )
        log += [
            MemberMetadataRecord(
                group_id=GROUP,
                member_id=member_id,
                client_id="bench",
                client_host="/10.0.0.1",
                subscribed_topic_names=(topic.name,),
                rebalance_timeout_ms=300_000,
            ),
            TargetAssignmentMemberRecord(group_id=GROUP, member_id=member_id, partitions=owned),
            CurrentMemberAssignmentRecord(
                group_id=GROUP,
                member_id=member_id,
                member_epoch=EPOCH,
                previous_member_epoch=EPOCH - 1,
                assigned=owned,
            ),
        ]
    log.append(
        TargetAssignmentMetadataRecord(group_id=GROUP, assignment_epoch=EPOCH, assignor_name="uniform")
    )
    return MetadataImage((topic,)), log, ids


def heartbeats_per_second(
    coordinator: GroupCoordinator, requests: list[ConsumerGroupHeartbeatRequest]
) -> float:
    best = float("inf")
    now = 0
    for _ in range(3):
        start = time.process_time()
        for request in requests:
            now += 1
            response = coordinator.apply(coordinator.heartbeat(request, now))
            if response.error:
                raise SystemExit(f"heartbeat failed: {response}")
        best = min(best, time.process_time() - start)
    return len(requests) / best


def measure(members: int) -> dict[str, float | int]:
    image, log, ids = stable_log(members)
    start = time.process_time()
    replayed = GroupCoordinator(image=image)
    for record in log:
        replayed.replay(record)
    replay_s = time.process_time() - start

    coordinator = GroupCoordinator(image=image)
    start = time.process_time()
    resumed = coordinator.load(log, 0)
    coordinator.apply(resumed)
    load_s = time.process_time() - start
    if resumed.records or coordinator.snapshot() != replayed.snapshot():
        raise SystemExit("the loaded group is not the replayed one")

    lean = [ConsumerGroupHeartbeatRequest(group_id=GROUP, member_id=m, member_epoch=EPOCH) for m in ids]
    group = coordinator.group(GROUP)
    assert group is not None
    full = [
        ConsumerGroupHeartbeatRequest(
            group_id=GROUP,
            member_id=m,
            member_epoch=EPOCH,
            topic_partitions=group.current_assignments[m].assigned.to_wire(),
        )
        for m in ids
    ]
    before = len(log)
    lean_rate = heartbeats_per_second(coordinator, lean)
    full_rate = heartbeats_per_second(coordinator, full)
    if coordinator.snapshot() != replayed.snapshot():
        raise SystemExit(f"steady-state heartbeats changed the group ({before} records)")
    return {
        "members": members,
        "partitions": members * PARTITIONS_PER_MEMBER,
        "records": len(log),
        "replay_ms": replay_s * 1000,
        "load_ms": load_s * 1000,
        "lean_heartbeats_per_s": lean_rate,
        "full_heartbeats_per_s": full_rate,
    }


#: The bounce runs: (label, config).
BOUNCES: tuple[tuple[str, BounceConfig], ...] = (
    ("10,000 dynamic, batched 1 s", BounceConfig()),
    ("10,000 static, batched 1 s", BounceConfig(static=True)),
    (
        "1,000 dynamic, batched 1 s",
        BounceConfig(members=1_000, partitions=10_000, wave_size=100, waves=1),
    ),
    (
        "1,000 dynamic, unbatched",
        BounceConfig(members=1_000, partitions=10_000, wave_size=100, waves=1, assignment_interval_ms=0),
    ),
)


def _wave_row(label: str, w: WaveStats) -> list[str]:
    return [
        label,
        w.name,
        f"{w.converge_ms / 1000:.1f} s",
        f"{w.moved:,}",
        f"{w.records:,}",
        f"{w.bumps:,}",
        f"{w.targets:,}",
        f"{w.heartbeats:,}",
        f"{w.coordinator_s:.1f} s",
    ]


def bounce_table(runs: list[tuple[str, BounceRun]]) -> str:
    rows: list[list[str]] = []
    for label, run in runs:
        rows.append(_wave_row(label, run.formation))
        for wave in run.waves:
            rows.append(_wave_row("", wave))
        if len(run.waves) > 1:
            total = WaveStats(name=f"{len(run.waves)} waves")
            for wave in run.waves:
                total.converge_ms = max(total.converge_ms, wave.converge_ms)
                total.moved += wave.moved
                total.records += wave.records
                total.bumps += wave.bumps
                total.targets += wave.targets
                total.heartbeats += wave.heartbeats
                total.coordinator_s += wave.coordinator_s
            row = _wave_row("", total)
            row[2] = "max " + row[2]
            rows.append(row)
    waves = format_table(
        [
            "group",
            "phase",
            "converged after",
            "partitions moved",
            "records",
            "epoch bumps",
            "targets",
            "heartbeats",
            "coordinator CPU",
        ],
        rows,
    )
    logs = format_table(
        ["group", "log records", "replay (CPU)", "compacted records", "replay compacted (CPU)", "wall"],
        [
            [
                label,
                f"{run.log_records:,}",
                f"{run.replay_s:.2f} s",
                f"{run.compacted_records:,}",
                f"{run.compacted_replay_s:.2f} s",
                f"{run.wall_s:.0f} s",
            ]
            for label, run in runs
        ],
    )
    return waves + "\n\n" + logs


def _bounce_json(label: str, run: BounceRun) -> dict[str, object]:
    def wave(w: WaveStats) -> dict[str, object]:
        return {
            "phase": w.name,
            "converge_ms": w.converge_ms,
            "moved": w.moved,
            "records": w.records,
            "bumps": w.bumps,
            "targets": w.targets,
            "heartbeats": w.heartbeats,
            "coordinator_cpu_s": round(w.coordinator_s, 3),
        }

    return {
        "group": label,
        "members": run.config.members,
        "partitions": run.config.partitions,
        "static": run.config.static,
        "assignment_interval_ms": run.config.assignment_interval_ms,
        "formation": wave(run.formation),
        "waves": [wave(w) for w in run.waves],
        "log_records": run.log_records,
        "replay_s": round(run.replay_s, 3),
        "compacted_records": run.compacted_records,
        "compacted_replay_s": round(run.compacted_replay_s, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", choices=("all", "heartbeats", "bounce"), default="all")
    parser.add_argument("--members", type=int, action="append", help="group size (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--only", action="append", help="bounce runs whose label contains this (repeatable)")
    args = parser.parse_args(argv)
    rows = [measure(n) for n in (args.members or SIZES)] if args.suite != "bounce" else []
    chosen = [(n, c) for n, c in BOUNCES if not args.only or any(o in n for o in args.only)]
    runs = [(label, run_bounce(c)) for label, c in chosen] if args.suite != "heartbeats" else []
    if args.json:
        print(json.dumps({"heartbeats": rows, "bounce": [_bounce_json(n, r) for n, r in runs]}, indent=2))
        return 0
    if rows:
        print(heartbeat_table(rows))
    if runs:
        if rows:
            print()
        print(bounce_table(runs))
    return 0


def heartbeat_table(rows: list[dict[str, float | int]]) -> str:
    return format_table(
        [
            "members",
            "partitions",
            "log records",
            "replay",
            "load",
            "lean heartbeats/s",
            "full heartbeats/s",
        ],
        [
            [
                f"{r['members']:,}",
                f"{r['partitions']:,}",
                f"{r['records']:,}",
                f"{r['replay_ms']:.0f} ms",
                f"{r['load_ms']:.0f} ms",
                f"{r['lean_heartbeats_per_s']:,.0f}",
                f"{r['full_heartbeats_per_s']:,.0f}",
            ]
            for r in rows
        ],
    )


if __name__ == "__main__":
    raise SystemExit(main())
