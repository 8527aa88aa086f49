"""Size and speed of the streamtasks userdata codecs, next to Kafka Streams' v11 SubscriptionInfo.

    .venv/bin/python benchmarks/codecs.py           # the table
    .venv/bin/python benchmarks/codecs.py --json    # rows as JSON

For 10, 100 and 1,000 tasks owned by one member, and every userdata version, it prints the
encoded bytes and the best-of-several encode / decode time per member in microseconds. Two
contents: "typical" (offset sums below 10^9, half of the tasks running) and "max sums" (every
offset sum near 2^63, the worst case for varints). ``streams v11`` is the size of Kafka Streams'
``SubscriptionInfoData`` v11 for the same content, computed from its schema: version and latest
version (8 B), process id (16 B), endpoint (int32 length + bytes), the task offset sums array
(int32 count, then per task 4 + 4 + 8 + 2 bytes: subtopology, partition, offset sum, null named
topology), unique field (1 B), error code (4 B) and client tags (int32 count, int32-length
key and value each). The script exits non-zero if any streamtasks SubscriptionInfo is larger.
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamtasks.protocol import (
    LATEST_VERSION,
    RUNNING_OFFSET_SUM,
    AssignmentInfo,
    SubscriptionInfo,
    decode_assignment_info,
    decode_subscription_info,
    encode_assignment_info,
    encode_subscription_info,
)
from topology.ids import TaskId

TASK_COUNTS = (10, 100, 1000)
ENDPOINT = "streamtasks-7.streamtasks.svc.cluster.local:8080"
TAGS = {"zone": "eu-west-1a", "cluster": "k8s-3"}
SUBTOPOLOGIES = 4
MEMBERS = 3  # the member owns every third partition


def owned_offset_sums(n: int, max_sums: bool) -> dict[TaskId, int]:
    sums: dict[TaskId, int] = {}
    for i in range(n):
        task = TaskId(i % SUBTOPOLOGIES, MEMBERS * (i // SUBTOPOLOGIES))
        if i % 2:
            sums[task] = RUNNING_OFFSET_SUM
        elif max_sums:
            sums[task] = (1 << 63) - 1 - i
        else:
            sums[task] = (i * 7_919_993) % 1_000_000_007
    return sums


def streams_v11_size(tasks: int) -> int:
    tags = 4 + sum(4 + len(k.encode()) + 4 + len(v.encode()) for k, v in TAGS.items())
    return 8 + 16 + 4 + len(ENDPOINT.encode()) + 4 + 18 * tasks + 1 + 4 + tags


def best_us(fn: Callable[[], object], budget_s: float = 0.04) -> float:
    """Best of 5 runs of about ``budget_s`` each, per call."""
    timer = timeit.Timer(fn)
    once = timer.timeit(number=1)
    number = max(1, int(budget_s / max(once, 1e-7)))
    return min(timer.repeat(repeat=5, number=number)) / number * 1e6


def rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for content in ("typical", "max sums"):
        for tasks in TASK_COUNTS:
            sums = owned_offset_sums(tasks, content == "max sums")
            info = SubscriptionInfo(
                process_id=uuid.UUID(int=2**127 + 12_345),
                task_offset_sums=sums,
                endpoint=ENDPOINT,
                capacity=4,
                rack="eu-west-1a",
                client_tags=TAGS,
                topology_fingerprint=bytes(range(16)),
            )
            active = frozenset(t for t, s in sums.items() if s == RUNNING_OFFSET_SUM)
            standby = frozenset(sums) - active
            assignment = AssignmentInfo(
                active_tasks=active,
                standby_tasks=standby,
                active_tasks_by_host={ENDPOINT: active},
                standby_tasks_by_host={ENDPOINT: standby},
                next_rebalance_ms=1_700_000_000_000,
                acceptable_recovery_lag=10_000,
            )
            streams = streams_v11_size(tasks)
            for version in range(1, LATEST_VERSION + 1):
                sub_bytes = encode_subscription_info(info, version)
                out.append(
                    {
                        "message": "SubscriptionInfo",
                        "content": content,
                        "version": version,
                        "tasks": tasks,
                        "bytes": len(sub_bytes),
                        "streams_v11_bytes": streams,
                        "encode_us": round(best_us(partial(encode_subscription_info, info, version))),
                        "decode_us": round(best_us(partial(decode_subscription_info, sub_bytes))),
                    }
                )
                if content != "typical":
                    continue
                a_bytes = encode_assignment_info(assignment, version)
                out.append(
                    {
                        "message": "AssignmentInfo",
                        "content": content,
                        "version": version,
                        "tasks": tasks,
                        "bytes": len(a_bytes),
                        "streams_v11_bytes": None,
                        "encode_us": round(best_us(partial(encode_assignment_info, assignment, version))),
                        "decode_us": round(best_us(partial(decode_assignment_info, a_bytes))),
                    }
                )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    args = parser.parse_args()
    table = rows()
    if args.json:
        print(json.dumps(table, indent=2))
    else:
        header = (
            "message",
            "content",
            "v",
            "tasks",
            "bytes",
            "streams v11",
            "ours/streams",
            "encode µs",
            "decode µs",
        )
        print(" | ".join(header))
        print(" | ".join("---" for _ in header))
        for r in table:
            streams = r["streams_v11_bytes"]
            ratio = "" if streams is None else f"{int(r['bytes']) / int(streams):.2f}"  # type: ignore[call-overload]
            print(
                " | ".join(
                    str(x)
                    for x in (
                        r["message"],
                        r["content"],
                        r["version"],
                        r["tasks"],
                        r["bytes"],
                        "" if streams is None else streams,
                        ratio,
                        r["encode_us"],
                        r["decode_us"],
                    )
                )
            )
    larger = [
        r
        for r in table
        if r["streams_v11_bytes"] is not None and int(r["bytes"]) > int(r["streams_v11_bytes"])
    ]  # type: ignore[call-overload]
    if larger:
        print(f"LARGER THAN KAFKA STREAMS: {larger}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
