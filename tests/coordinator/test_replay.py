"""Replay is the only mutation: for any sequence of writes (joins, heartbeats honest or not,
leaves, static leaves and takeovers, timers, metadata changes, client-side Prepare/Install,
fail-overs), the state after applying the records equals the state after replaying them into a
fresh coordinator, and after replaying the compacted log. Writes change nothing until applied;
no partition is ever owned by two members; the group epoch never goes backwards."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streamtasks.coordinator import GroupCoordinator, Record, TopicPartitionSet, record_key
from streamtasks.protocol.consumer_group import ClientAssignor
from tests.coordinator.support import GROUP, Harness, assert_exclusive, image, tps, wire

MEMBERS = ("m1", "m2", "m3", "m4")
TOPICS = ("foo", "bar")


def fresh_from(h: Harness, records: list[Record]) -> GroupCoordinator:
    c = h.coordinator
    fresh = GroupCoordinator(c.config, assignors=c.assignors, image=c.image)
    for record in records:
        fresh.replay(record)
    return fresh


def compacted(records: list[Record]) -> list[Record]:
    last: dict[tuple[str, ...], tuple[int, Record]] = {}
    for i, record in enumerate(records):
        last[record_key(record)] = (i, record)
    return [r for _, r in sorted(last.values(), key=lambda e: e[0])]


def valid_install(h: Harness, member_id: str) -> None:
    prepared = h.prepare(member_id)
    if prepared.error != 0:
        return
    subscribers: dict[Any, list[str]] = {}
    for m in prepared.members:
        for t in m.subscribed_topic_ids:
            subscribers.setdefault(t, []).append(m.member_id)
    out: dict[str, dict[Any, list[int]]] = {m.member_id: {} for m in prepared.members}
    for topic in prepared.topics:
        who = sorted(subscribers.get(topic.topic_id, []))
        for p in range(topic.num_partitions):
            out[who[p % len(who)]].setdefault(topic.topic_id, []).append(p)
    versions = {m.member_id: m.assignor.minimum_version for m in prepared.members}
    h.install(
        member_id, prepared.group_epoch, {m: TopicPartitionSet(p) for m, p in out.items()}, versions=versions
    )


@st.composite
def steps(draw: st.DrawFn) -> list[tuple[str, Any]]:
    ops = st.one_of(
        st.tuples(
            st.just("join"),
            st.tuples(
                st.sampled_from(MEMBERS),
                st.lists(st.sampled_from(TOPICS), min_size=1, max_size=2, unique=True).map(tuple),
                st.booleans(),  # static
                st.sampled_from([None, "uniform", "range", "client"]),
            ),
        ),
        st.tuples(st.just("heartbeat"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("heartbeat"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("lie"), st.tuples(st.sampled_from(MEMBERS), st.integers(-1, 3), st.booleans())),
        st.tuples(st.just("silent"), st.sampled_from(MEMBERS)),  # heartbeat without owned partitions
        st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("static_leave"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("advance"), st.integers(1, 50_000)),
        st.tuples(st.just("grow"), st.tuples(st.sampled_from(TOPICS), st.integers(1, 6))),
        st.tuples(st.just("install"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("bad_install"), st.sampled_from(MEMBERS)),
        st.tuples(st.just("fail_over"), st.none()),
        st.tuples(st.just("delete"), st.none()),
    )
    return draw(st.lists(ops, min_size=1, max_size=40))


def run(h: Harness, op: str, arg: Any, sizes: dict[str, int]) -> None:
    group = h.group
    known = group is not None and group.member(arg) is not None if isinstance(arg, str) else False
    if op == "join":
        member_id, topics, static, assignor = arg
        client = (
            (
                ClientAssignor(
                    name="st", minimum_version=0, maximum_version=2, metadata_version=1, metadata_bytes=b"x"
                ),
            )
            if assignor == "client"
            else None
        )
        h.join(
            member_id,
            topics,
            instance_id=f"i-{member_id}" if static else None,
            server_assignor=assignor if assignor in ("uniform", "range") else None,
            client_assignors=client,
            rebalance_timeout_ms=20_000,
        )
    elif op == "heartbeat" and arg in h.members:
        h.heartbeat(arg)
    elif op == "silent" and arg in h.members:
        h.heartbeat(arg, topic_partitions=None)
    elif op == "lie" and arg[0] in h.members:
        member_id, delta, more = arg
        member = h.members[member_id]
        owned = member.owned.union(tps(foo=[0, 1])) if more else member.owned
        h.heartbeat(member_id, member_epoch=max(1, member.epoch + delta), topic_partitions=wire(owned))
    elif op == "leave" and known:
        h.heartbeat(arg, member_epoch=-1)
    elif op == "static_leave" and known and group.member(arg).instance_id is not None:
        h.heartbeat(arg, member_epoch=-2, instance_id=group.member(arg).instance_id)
    elif op == "advance":
        h.advance(arg)
    elif op == "grow":
        topic, extra = arg
        sizes[topic] = sizes.get(topic, 0) + extra
        h.apply(h.coordinator.on_metadata_image(image(sizes), h.now))
    elif op == "install" and arg in h.members:
        valid_install(h, arg)
    elif op == "bad_install" and arg in h.members:
        prepared = h.prepare(arg)
        if prepared.error == 0:
            h.install(arg, prepared.group_epoch, {arg: tps(foo=[0])})
    elif op == "fail_over":
        c = h.coordinator
        fresh = GroupCoordinator(c.config, assignors=c.assignors, image=c.image)
        resumed = fresh.load(h.log, h.now)
        assert fresh.snapshot() == c.snapshot()
        h.coordinator = fresh
        h.apply(resumed)
    elif op == "delete":
        h.apply(h.coordinator.delete_group(GROUP, h.now))


@given(steps())
def test_applied_state_equals_replayed_state(ops: list[tuple[str, Any]]) -> None:
    sizes = {"foo": 3}
    h = Harness(sizes)
    last_epoch = 0
    for op, arg in ops:
        before = h.coordinator.snapshot()
        if op == "heartbeat" and arg in h.members:  # writes change nothing until applied
            m = h.members[arg]
            from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest

            h.coordinator.heartbeat(
                ConsumerGroupHeartbeatRequest(group_id=GROUP, member_id=arg, member_epoch=m.epoch), h.now
            )
            assert h.coordinator.snapshot() == before
        run(h, op, arg, sizes)
        assert_exclusive(h.coordinator)
        group = h.group
        if group is not None:
            assert group.group_epoch >= last_epoch
            assert group.assignment_epoch <= group.group_epoch
            last_epoch = group.group_epoch
        else:
            last_epoch = 0
    assert fresh_from(h, h.log).snapshot() == h.coordinator.snapshot()
    assert fresh_from(h, compacted(h.log)).snapshot() == h.coordinator.snapshot()


@given(steps())
def test_group_converges_once_everyone_heartbeats(ops: list[tuple[str, Any]]) -> None:
    """After any history, honest heartbeats (and client-side installs) settle the group."""
    sizes = {"foo": 3}
    h = Harness(sizes)
    for op, arg in ops:
        if op != "advance":  # keep every session alive
            run(h, op, arg, sizes)
    group = h.group
    if group is None:
        return
    for member_id in list(h.members):
        current = group.current(member_id)
        if current is not None and current.member_epoch == -2:
            h.join(member_id, **_rejoin_args(group.member(member_id)))
    for _ in range(4):
        request = h.group.client_request
        if request is not None:
            valid_install(h, request.member_id)
        h.settle(3)
    group = h.group
    assert group.state.value in ("Stable", "Empty"), group.state
    for member_id in group.members:
        assert group.current(member_id).assigned == group.target(member_id).partitions.only_topics(
            frozenset(
                t.topic_id
                for n in group.member(member_id).subscribed_topic_names
                if (t := group.topic_by_name(n))
            )
        )


def _rejoin_args(member: Any) -> dict[str, Any]:
    return {
        "topics": member.subscribed_topic_names,
        "instance_id": member.instance_id,
        "server_assignor": member.server_assignor,
        "client_assignors": member.client_assignors or None,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
    }
