"""The classic member's per-phase logic, tested directly: pure functions over frozen records."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from assignors.partition.sticky import CooperativeStickyAssignor
from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic.phases import (
    commit_verdict,
    join_problem,
    join_revocation,
    leave_request,
    metadata_changed,
    missed_generations,
    next_deadline,
    read_assignment,
    request_timeout,
    session_lapsed,
    wants_join,
)
from streamtasks.membership.classic.reactions import Api, Reaction
from streamtasks.membership.classic.records import (
    Gate,
    InFlight,
    LeaderView,
    Link,
    Membership,
    Purpose,
    Rejoin,
    Requests,
    Round,
)
from streamtasks.membership.classic.states import MemberState as S
from streamtasks.protocol.classic_group import JoinGroupResponse, SyncGroupResponse
from streamtasks.protocol.errors import KafkaErrorCode as E
from tests.ids import tp, tps
from tests.membership.classic.helpers import assignment_bytes, config

OWNED = tps("t-0", "t-1", "u-0")
NAME = CooperativeStickyAssignor().name


def test_join_revocation_eager_revokes_everything_cooperative_only_unsubscribed_topics() -> None:
    assert join_revocation(RebalanceProtocol.EAGER, OWNED, ("t", "u")) == OWNED
    assert join_revocation(RebalanceProtocol.COOPERATIVE, OWNED, ("t", "u")) == frozenset()
    assert join_revocation(RebalanceProtocol.COOPERATIVE, OWNED, ("t",)) == tps("u-0")


def test_wants_join_by_state_round_and_rejoin() -> None:
    assert wants_join(S.UNJOINED, Round(), Rejoin())
    assert wants_join(S.JOINING, Round(join_sent=False), Rejoin())
    assert not wants_join(S.JOINING, Round(join_sent=True), Rejoin())
    assert not wants_join(S.STABLE, Round(), Rejoin())
    assert wants_join(S.STABLE, Round(), Rejoin(needed=True, reason="r"))
    assert not wants_join(S.SYNCING, Round(), Rejoin(needed=True, reason="r"))


def test_join_problem_names_an_unknown_protocol_and_an_older_generation() -> None:
    cfg = config()
    ok = JoinGroupResponse(error=E.NONE, generation_id=3, protocol_name=NAME, member_id="m")
    assert join_problem(cfg, Membership(generation=3), ok) is None
    older = JoinGroupResponse(error=E.NONE, generation_id=2, protocol_name=NAME, member_id="m")
    assert "older than ours" in (join_problem(cfg, Membership(generation=3), older) or "")
    other = JoinGroupResponse(error=E.NONE, generation_id=4, protocol_name="range", member_id="m")
    assert "not one of" in (join_problem(cfg, Membership(generation=3), other) or "")


def test_missed_generations_only_with_the_rule_on_and_partitions_owned() -> None:
    resp = JoinGroupResponse(error=E.NONE, generation_id=5, protocol_name=NAME, member_id="m")
    on = config(lose_on_missed_generation=True)
    assert missed_generations(on, Membership(generation=3), OWNED, resp) == (
        "missed generation(s) 4..4: owned partitions lost"
    )
    assert missed_generations(on, Membership(generation=4), OWNED, resp) is None
    assert missed_generations(on, Membership(generation=3), frozenset(), resp) is None
    off = config(lose_on_missed_generation=False)
    assert missed_generations(off, Membership(generation=3), OWNED, resp) is None


def test_read_assignment_returns_partitions_and_user_data_or_the_problem() -> None:
    good = SyncGroupResponse(error=E.NONE, assignment=assignment_bytes([tp("t", 0)]))
    assert read_assignment(good, NAME, ("t",)) == (tps("t-0"), b"")
    foreign = SyncGroupResponse(error=E.NONE, assignment=assignment_bytes([tp("x", 0)]))
    assert "do not subscribe" in str(read_assignment(foreign, NAME, ("t",)))
    other = SyncGroupResponse(error=E.NONE, protocol_name="range", assignment=b"")
    assert "!=" in str(read_assignment(other, NAME, ("t",)))
    garbage = SyncGroupResponse(error=E.NONE, assignment=b"\x00")
    assert "malformed assignment" in str(read_assignment(garbage, NAME, ("t",)))


def test_commit_verdict_takes_the_most_severe_reaction() -> None:
    assert commit_verdict([E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION]) == (
        Reaction.RESET_GENERATION,
        E.ILLEGAL_GENERATION,
    )
    assert commit_verdict([E.NOT_COORDINATOR, E.FENCED_INSTANCE_ID])[0] is Reaction.FATAL
    assert commit_verdict([E.REBALANCE_IN_PROGRESS]) == (Reaction.RETRY, E.REBALANCE_IN_PROGRESS)


def test_metadata_changed_learns_counts_a_lazy_snapshot_did_not_know() -> None:
    lazy = LeaderView(group_topics=("t",), snapshot=MappingProxyType({"t": None}), snapshot_lazy=True)
    changed, learnt = metadata_changed(lazy, {"t": 3})
    assert not changed
    assert learnt.snapshot == {"t": 3}
    changed, _ = metadata_changed(learnt, {"t": 4})
    assert changed
    strict = LeaderView(group_topics=("t",), snapshot=MappingProxyType({"t": None}))
    assert metadata_changed(strict, {"t": 3}) == (True, strict)


def test_static_members_and_members_without_id_send_no_leave() -> None:
    link = Link.starting(0)
    known = Link(coordinator_known=True, find_retry_ms=0, join_retry_ms=0, hb_next_ms=0, hb_last_ok_ms=0)
    member = Membership(member_id="m", generation=1)
    assert leave_request(config(), member, link, "bye") is None  # coordinator unknown
    assert leave_request(config(group_instance_id="i"), member, known, "bye") is None
    assert leave_request(config(), Membership(), known, "bye") is None
    request = leave_request(config(), member, known, "bye")
    assert request is not None
    assert request.member_id == "m"


def test_join_group_waits_out_the_rebalance_timeout() -> None:
    cfg = config()
    assert request_timeout(cfg, Api.JOIN_GROUP) == cfg.rebalance_timeout_ms + 5_000
    assert request_timeout(cfg, Api.HEARTBEAT) == cfg.request_timeout_ms


def test_next_deadline_is_the_earliest_timer_and_none_when_closed() -> None:
    cfg = config()
    link = Link(coordinator_known=True, find_retry_ms=0, join_retry_ms=50, hb_next_ms=900, hb_last_ok_ms=0)
    gate = Gate(purpose=Purpose.JOIN, partitions=OWNED, deadline_ms=30_000, retry_at_ms=400)
    inflight = Requests(next_id=1, inflight={1: InFlight(api=Api.HEARTBEAT, deadline_ms=700, generation=1)})
    kw = {"generation": 1, "link": link, "rejoin": Rejoin()}
    assert next_deadline(S.CLOSED, cfg, requests=Requests(), round_=Round(), **kw) is None  # type: ignore[arg-type]
    assert next_deadline(S.STABLE, cfg, requests=Requests(), round_=Round(), **kw) == 900  # type: ignore[arg-type]
    assert next_deadline(S.STABLE, cfg, requests=inflight, round_=Round(), **kw) == 700  # type: ignore[arg-type]
    assert next_deadline(S.PREPARING, cfg, requests=Requests(), round_=Round(), gate=gate, **kw) == 400  # type: ignore[arg-type]
    assert next_deadline(S.UNJOINED, cfg, requests=Requests(), round_=Round(), **kw) == 50  # type: ignore[arg-type]


def test_the_session_rule_does_not_watch_a_join_or_sync_in_flight() -> None:
    """A JoinGroup or SyncGroup in flight is the coordinator's to answer when the rebalance is
    done (Tansu holds a follower's SyncGroup ~5 s, and the heartbeats queue behind it); a
    member committing before a revocation heartbeats on, so its silence counts."""
    cfg = config()  # a 10 s session
    link = Link(coordinator_known=True, find_retry_ms=0, join_retry_ms=0, hb_next_ms=0, hb_last_ok_ms=0)
    member = Membership(member_id="m1", generation=3, protocol_name=NAME, leader_id="m1", is_leader=True)
    lapsed = {state for state in S if session_lapsed(state, member, link, cfg, 10_001)}
    assert lapsed == {S.STABLE, S.PREPARING, S.REVOKING, S.LEAVING}
    assert not session_lapsed(S.STABLE, member, link, cfg, 10_000)
    assert not session_lapsed(S.STABLE, Membership(member_id="m1"), link, cfg, 10_001)  # no generation
    # the next heartbeat and the silent coordinator are far off: only the lapse is due soon
    waiting = replace(link, hb_next_ms=50_000, hb_last_ok_ms=50_000)
    kw = {"generation": 3, "link": waiting, "requests": Requests(), "round_": Round(), "rejoin": Rejoin()}
    assert next_deadline(S.STABLE, cfg, **kw) == 10_001  # type: ignore[arg-type]
    assert next_deadline(S.SYNCING, cfg, **kw) == 50_000  # type: ignore[arg-type]
