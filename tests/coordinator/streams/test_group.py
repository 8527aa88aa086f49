"""The group's replay indexes: the current warm-ups and whether a member has a user endpoint
are what a walk of its records finds, on the group and on a write's copy; a copy's task index
(overlaid on the group's) is the one replaying every record builds, the group's unchanged."""

from __future__ import annotations

from streamtasks.coordinator.streams import (
    StreamsCurrentAssignmentRecord,
    StreamsCurrentAssignmentTombstone,
    StreamsMemberRecord,
    StreamsMemberTombstone,
    StreamsRecord,
)
from streamtasks.coordinator.streams.group import StreamsGroup
from streamtasks.protocol.streams_group import Endpoint

G = "app"


def _member(mid: str, endpoint: Endpoint | None = None) -> StreamsMemberRecord:
    return StreamsMemberRecord(
        group_id=G,
        member_id=mid,
        process_id=mid,
        rebalance_timeout_ms=1,
        topology_epoch=1,
        user_endpoint=endpoint,
    )


def _current(mid: str, *warmup: int, active: tuple[int, ...] = ()) -> StreamsCurrentAssignmentRecord:
    return StreamsCurrentAssignmentRecord(
        group_id=G,
        member_id=mid,
        member_epoch=1,
        previous_member_epoch=0,
        active=frozenset(("1", p) for p in active),
        warmup=frozenset(("0", p) for p in warmup),
    )


def _walked(group: StreamsGroup) -> tuple[dict[str, frozenset[tuple[str, int]]], bool]:
    warming = {mid: c.warmup for mid, c in group.currents.items() if c.warmup}
    return warming, any(m.user_endpoint is not None for m in group.members.values())


RECORDS: list[StreamsRecord] = [
    _member("a"),
    _member("b", Endpoint(host="b", port=1)),
    _current("a", 1, 2, active=(0, 1)),
    _current("b", active=(2,)),
    _member("b"),  # b drops its endpoint
    _member("c", Endpoint(host="c", port=1)),
    _current("b", 3, active=(2, 3)),
    _current("a", active=(1,)),  # a's warm-ups are done, task 0 given up
    _current("c", 0),
    StreamsCurrentAssignmentTombstone(group_id=G, member_id="b"),
    StreamsMemberTombstone(group_id=G, member_id="c"),
    _current("a", 4, active=(0, 1)),
]


def test_the_indexes_follow_every_record() -> None:
    group = StreamsGroup(G)
    seen = []
    for record in RECORDS:
        group.replay(record)
        assert (dict(group.warming), group.has_endpoints) == _walked(group)
        seen.append((len(group.warming), group.has_endpoints))
    assert seen == [
        (0, False),
        (0, True),
        (1, True),
        (1, True),
        (1, False),
        (1, True),
        (2, True),
        (1, True),
        (2, True),
        (1, True),
        (1, False),
        (2, False),
    ]


def test_a_copy_keeps_its_own_indexes() -> None:
    group = StreamsGroup(G)
    for record in RECORDS[:6]:
        group.replay(record)
    before = (dict(group.warming), group.has_endpoints)
    copy = group.copy()
    for record in RECORDS[6:]:
        copy.replay(record)
        assert (dict(copy.warming), copy.has_endpoints) == _walked(copy)
    assert (dict(group.warming), group.has_endpoints) == before == _walked(group)
    again = StreamsGroup(G)
    for record in RECORDS:
        again.replay(record)
    assert copy.snapshot() == again.snapshot()  # the copy's task index is the replayed one's
    assert [copy.owner(("1", p)) for p in range(5)] == ["a", "a", None, None, None]
    assert [group.owner(("1", p)) for p in range(5)] == ["a", "a", "b", None, None]
