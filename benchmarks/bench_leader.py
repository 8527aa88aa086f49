"""The classic-group leader step: ``uniform`` under COOPERATIVE, from the JoinGroup member list
to the SyncGroup assignments (``streamtasks.membership.classic.leader.lead``).

Run it alone with ``python benchmarks/bench_leader.py [--quick]``; ``benchmarks/assignors.py``
prints its table after the assignor table. Every figure is the best of several runs, timed
with the garbage collector on after a ``gc.collect()``, as in bench_partition.

Shape: 10,000 members x 100,000 partitions over 100 topics (the issue's size), every member
subscribing to every topic, each member's subscription encoded as a Java consumer writes it
(consumer protocol v3, owned partitions and generation). Cases: a fresh group; one member
added (every old member claims its share of the leader's own fresh assignment, generation 1);
one member removed (the same claims, one member gone).

Columns: ``decode`` (every subscription, ``decode_members``), ``assignor`` (``uniform`` alone on
the decoded group), ``check`` (``cooperative.check_result`` of its result), ``adjust``
(``cooperative.adjust`` of every member's claim and that result, called on its own; inside the
step it reuses the check's work), ``encode`` (one assignment per member), ``total`` (the whole
step, ``lead``, which pauses the cyclic garbage collector) and ``total, gc running`` (the same
step without that pause).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import bench_partition
from _paths import project_imports
from _table import format_table

with project_imports():
    from assignors import cooperative
    from assignors.partition.metadata import prune_unknown_topics
    from assignors.partition.types import GroupSubscription, RebalanceProtocol
    from assignors.partition.uniform import UniformAssignor
    from streamtasks.membership.classic import leader
    from streamtasks.protocol.classic_group import JoinGroupMember, SyncGroupAssignment
    from streamtasks.protocol.consumer_bulk import AssignmentEncoder
    from streamtasks.protocol.consumer_protocol import ConsumerProtocolSubscription, encode_subscription
    from topology.bulk import bulk
    from topology.ids import TopicPartition

__all__ = ["COLUMNS", "GOAL", "render", "rows"]

GOAL = 0.2  # seconds, issue 12: the whole leader step at 10,000 x 100,000
SHAPE = (10_000, 100_000, 100)

#: (row key, column heading)
COLUMNS = (
    ("case", "leader step, uniform, COOPERATIVE"),
    ("decode", "decode"),
    ("assignor", "assignor"),
    ("check", "check"),
    ("adjust", "adjust"),
    ("encode", "encode"),
    ("total", "total"),
    ("goal", "goal"),
    ("meets_goal", "ok"),
    ("total_gc_running", "total, gc running"),
)


def _members(
    names: Sequence[str], counts: dict[str, int], owned: dict[str, tuple[TopicPartition, ...]]
) -> list[JoinGroupMember]:
    topics = tuple(counts)
    out = []
    for name in names:
        mine = owned.get(name, ())
        subscription = ConsumerProtocolSubscription(
            topics=topics, user_data=None, owned_partitions=mine, generation_id=1 if mine else -1
        )
        out.append(
            JoinGroupMember(
                member_id=name, group_instance_id=None, metadata=encode_subscription(subscription)
            )
        )
    return out


def _encode_all(assignment: dict[str, tuple[TopicPartition, ...]]) -> list[SyncGroupAssignment]:
    """One SyncGroup assignment per member, as the leader writes them."""
    members = list(assignment)
    count = len(members)
    data = AssignmentEncoder().encode_all(list(assignment.values()), [None] * count, [3] * count)
    return bulk(SyncGroupAssignment, count, {"member_id": members, "assignment": data})


def _row(case: str, members: list[JoinGroupMember], counts: dict[str, int], repeat: int) -> dict[str, object]:
    assignor = UniformAssignor()
    best = bench_partition._best
    decode, decoded = best(
        lambda: leader.decode_members(members, assignor=assignor, generation_marker=True), repeat
    )
    group, _ = prune_unknown_topics(
        GroupSubscription(members=decoded.subscriptions, partitions_per_topic=counts)
    )
    alone, target = best(lambda: assignor.assign(group), repeat)
    check, _ = best(lambda: cooperative.check_result(assignor, group, target), repeat)
    owned = cooperative.owned_from(group)
    adjust, _ = best(lambda: cooperative.adjust(owned, target.members), repeat)
    result = cooperative.assign(assignor, group, RebalanceProtocol.COOPERATIVE)
    encode, _ = best(lambda: _encode_all(dict(result.members)), repeat)
    total, _ = best(lambda: leader.lead(members, assignor=assignor, partitions_per_topic=counts), repeat)
    running, _ = best(  # the step without its collector pause (a private function, on purpose)
        lambda: leader._lead(members, assignor=assignor, partitions_per_topic=counts, generation_marker=True),
        repeat,
    )
    return {
        "suite": "leader",
        "case": case,
        "decode": decode,
        "assignor": alone,
        "check": check,
        "adjust": adjust,
        "encode": encode,
        "total": total,
        "goal": GOAL,
        "meets_goal": total <= GOAL,
        "total_gc_running": running,
    }


def rows(quick: bool = False) -> list[dict[str, object]]:
    """Fresh, one member added, one member removed, at the issue's size (``quick``: fewer runs)."""
    repeat = 3 if quick else 7
    n, p, t = SHAPE
    names, counts = bench_partition._shape(n, p, t)
    fresh = _members(names, counts, {})
    first = leader.lead(fresh, assignor=UniformAssignor(), partitions_per_topic=counts).assignment
    owned = dict(first)
    return [
        _row(bench_partition._case(n, p, t, "fresh"), fresh, counts, repeat),
        _row(
            bench_partition._case(n, p, t, "one member added"),
            _members([*names, "member-new"], counts, owned),
            counts,
            repeat,
        ),
        _row(
            bench_partition._case(n, p, t, "one member removed"),
            _members(names[1:], counts, owned),
            counts,
            repeat,
        ),
    ]


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def render(table: list[dict[str, object]]) -> str:
    return format_table([h for _, h in COLUMNS], [[_cell(r[key]) for key, _ in COLUMNS] for r in table])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    print(render(rows(quick=parser.parse_args().quick)))


if __name__ == "__main__":
    main()
