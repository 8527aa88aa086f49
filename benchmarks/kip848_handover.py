"""The protocol's own waits in a KIP-848 warm-up hand-over, without a network or a loaded machine.

    .venv/bin/python benchmarks/kip848_handover.py [--interval-ms 500] [--step-ms 25]

Two real members (:class:`ConsumerMember`, the streams assignor client-side) against the real
coordinator (:class:`GroupCoordinator`), driven by the test harness of
``tests/membership/consumer`` on a simulated clock: every request is answered at once, the old
owner's commit too, so what remains is what the protocol waits for. ``a`` owns every task;
``b`` holds warm-ups and computes the new assignment itself (the coordinator asks the member
whose heartbeat bumped the group epoch, docs/protocol.md). At a trigger time swept over one
heartbeat interval (``--step-ms``), ``b`` reports its warm-ups caught up and calls
``enforce_rebalance`` (as ``streamtasks.App`` does); the figure is the simulated time until
``b`` owns the moved partitions, and the two steps it is made of: until ``a`` has released
them, and from then until ``b`` has them.

Prints one table row per column of figures: min / median / max over the sweep (simulated ms).
"""

from __future__ import annotations

import argparse
import statistics
import sys

from _paths import project_imports
from _table import format_table

with project_imports():
    from streamtasks.coordinator import CoordinatorConfig
    from streamtasks.membership.consumer import AssignorMetadataChanged
    from streamtasks.protocol.userdata import decode_assignment_info
    from tests.membership.consumer.helpers import Cluster, streams_member
    from topology import TopologyBuilder


def one(interval_ms: int, offset_ms: int) -> tuple[int, int, int]:
    """(released, received, total) ms after a trigger ``offset_ms`` into a heartbeat phase."""
    builder = TopologyBuilder("app")
    builder.stream("foo").store("counts")
    topology = builder.build()
    config = CoordinatorConfig(
        session_timeout_ms=10_000, heartbeat_interval_ms=interval_ms, server_assignors=("uniform",)
    )
    c = Cluster(config=config)
    streams_member(c, "a", topology, {})
    c.run(3_000, step=5)
    streams_member(c, "b", topology, {})
    c.run(4_000, step=5)
    if offset_ms:
        c.run(offset_ms, step=5)
    info = decode_assignment_info(c.nodes["b"].member.assignment_user_data)
    if c.owned("b") or not info.warmup_tasks:
        raise RuntimeError("b should hold warm-ups only before the trigger")
    moved = {tp for tp in c.owned("a") if any(t.partition == tp.partition for t in info.warmup_tasks)}
    sums = {t: 100 for t in info.standby_tasks | info.warmup_tasks}
    c.handle(
        "b", AssignorMetadataChanged(name="streamtasks", metadata=streams_member(c, "b", topology, sums))
    )
    c.nodes["b"].member.enforce_rebalance("warm-up caught up", c.now)
    start, released = c.now, None
    while not moved <= c.owned("b"):
        c.tick(5)
        if released is None and not moved & c.owned("a"):
            released = c.now - start
        if c.now - start > 10 * interval_ms:
            raise RuntimeError(f"no hand-over within {10 * interval_ms} ms (offset {offset_ms})")
    total = c.now - start
    if released is None:
        released = total
    return released, total - released, total


def spread(values: list[int]) -> str:
    return f"{min(values)} / {statistics.median(values):.0f} / {max(values)}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--interval-ms", type=int, default=500, help="the coordinator's heartbeat interval")
    parser.add_argument("--step-ms", type=int, default=25, help="trigger offsets swept over one interval")
    args = parser.parse_args()
    runs = [one(args.interval_ms, off) for off in range(0, args.interval_ms, args.step_ms)]
    rows = [
        ["trigger -> old owner released", spread([r[0] for r in runs])],
        ["released -> new owner has them", spread([r[1] for r in runs])],
        ["trigger -> new owner has them", spread([r[2] for r in runs])],
    ]
    print(
        f"benchmarks/kip848_handover.py --interval-ms {args.interval_ms} --step-ms {args.step_ms}: "
        f"{len(runs)} trigger offsets, simulated ms (min / median / max); answers instant"
    )
    print(format_table(["step", "simulated ms"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
