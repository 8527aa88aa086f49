"""Classic members in the replay properties: for any history of classic joins (eager and
cooperative, static and dynamic), syncs, heartbeats, silences, leaves, restarts and KIP-848
members beside them, the state after applying the records equals the state after replaying them
(and the compacted log) into a fresh coordinator; no partition is ever owned by two clients;
and once everybody keeps talking, the group settles with every partition owned."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamtasks.coordinator.record_codec import decode_log_record, encode_log_record
from tests.coordinator.classic_support import ClassicHarness
from tests.coordinator.support import assert_exclusive
from tests.coordinator.test_replay import compacted, fresh_from
from tests.coordinator.test_replay import run as replay_run

CLASSIC = ("a", "b", "c")
KIP848 = ("m1", "m2")


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, Any]]:
    ops = st.one_of(
        st.tuples(st.just("cjoin"), st.tuples(st.sampled_from(CLASSIC), st.booleans(), st.booleans())),
        st.tuples(st.just("step"), st.sampled_from(CLASSIC)),
        st.tuples(st.just("step"), st.sampled_from(CLASSIC)),
        st.tuples(st.just("cleave"), st.sampled_from(CLASSIC)),
        st.tuples(st.just("restart"), st.sampled_from(CLASSIC)),
        st.tuples(st.just("join"), st.sampled_from(KIP848)),
        st.tuples(st.just("heartbeat"), st.sampled_from(KIP848)),
        st.tuples(st.just("leave"), st.sampled_from(KIP848)),
        st.tuples(st.just("advance"), st.integers(1, 40_000)),
        st.tuples(st.just("fail_over"), st.none()),
    )
    return draw(st.lists(ops, min_size=1, max_size=30))


def run(h: ClassicHarness, op: str, arg: Any, *, timers: bool = True) -> None:
    group = h.group
    if op == "cjoin":
        name, cooperative, static = arg
        if name not in h.classic:
            h.add(name, cooperative=cooperative, instance_id=f"i-{name}" if static else None)
            h.cjoin(name)
    elif op == "step" and arg in h.classic:
        h.step(arg)
    elif op == "cleave" and arg in h.classic and not h.classic[arg].parked:
        h.cleave(arg)
    elif op == "restart" and arg in h.classic:
        # the process restarts: it owns nothing; a dynamic member also loses its member id
        client = h.classic[arg]
        client.owned, client.generation, client.parked, client.needs_rejoin = frozenset(), -1, False, True
        if client.instance_id is None:
            client.member_id = ""
    elif op == "join" and arg not in h.members:
        h.join(arg)
    elif op == "heartbeat" and arg in h.members and group is not None and group.member(arg) is not None:
        h.heartbeat(arg)
    elif op == "leave" and arg in h.members and group is not None and group.member(arg) is not None:
        h.heartbeat(arg, member_epoch=-1)
        del h.members[arg]
    elif op == "advance" and timers:
        h.advance(arg)
    elif op == "fail_over":
        replay_run(h, op, arg, {"foo": 3})
        for client in h.classic.values():  # their connections broke: parked joins are sent again
            if client.parked:
                client.parked, client.needs_rejoin = False, True


@settings(deadline=None)
@given(histories())
def test_classic_history_replays_to_the_same_state(ops: list[tuple[str, Any]]) -> None:
    h = ClassicHarness()
    for op, arg in ops:
        before = h.coordinator.snapshot()
        if op == "step" and arg in h.classic and not h.classic[arg].parked:
            client = h.classic[arg]
            h.coordinator.join_group(h.join_request(client), h.now, new_member_id="probe", api_version=9)
            assert h.coordinator.snapshot() == before  # a write changes nothing until applied
        run(h, op, arg)
        if op in ("advance", "fail_over"):
            h.forget_removed()
        h.check_owners()
        assert_exclusive(h.coordinator)
    assert fresh_from(h, h.log).snapshot() == h.coordinator.snapshot()
    assert fresh_from(h, compacted(h.log)).snapshot() == h.coordinator.snapshot()
    decoded = [decode_log_record(*encode_log_record(r)) for r in h.log]
    assert fresh_from(h, decoded).snapshot() == h.coordinator.snapshot()


@settings(deadline=None)
@given(histories())
def test_mixed_group_settles_once_everybody_talks(ops: list[tuple[str, Any]]) -> None:
    h = ClassicHarness()
    for op, arg in ops:
        run(h, op, arg, timers=False)
        h.check_owners()
    # a minute of everybody talking every 5 s: parked joins reach their deadline, members a
    # restart left behind time out, and removed clients rejoin
    for _ in range(13):
        h.advance(5_000)
        h.forget_removed()
        h.settle_all(2)
    h.settle_all(6)
    group = h.group
    if group is None or not group.members:
        return
    assert group.state.value == "Stable", group.state
    owned = sum(len(c.owned) for c in h.classic.values()) + sum(len(m.owned) for m in h.members.values())
    assert owned == 3
