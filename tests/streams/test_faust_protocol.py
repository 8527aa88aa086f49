"""The ``"faust"`` protocol on streamtasks members, against faust-streaming's own assignor.

faust's ``PartitionAssignor`` runs here unchanged (no broker: it is handed the members' bytes
and a partition-count table): it leads groups holding streamtasks members, its members check
the assignments a streamtasks leader sends (faust asserts the partitions equal what its
``ClientMetadata`` implies, order included, and that the url is its own), and the
reimplemented algorithm gives faust's answers on fixed scenarios.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import faust
import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from faust.assignor.partition_assignor import PartitionAssignor

from assignors.partition.hooks import AssignmentListener
from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import AssignorError, DecodeError
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.foreign import ForeignProtocolAssignor
from streamtasks.membership.classic.leader import lead
from streamtasks.membership.classic.subscription import join_protocols
from streamtasks.protocol.classic_group import JoinGroupMember
from streamtasks.protocol.consumer_protocol import decode_assignment
from streamtasks.protocol.faust_compat import decode_faust_subscription
from streamtasks.streams.faust_assignment import FaustMemberInput, faust_assign
from streamtasks.streams.faust_protocol import FaustProtocolAssignor, faust_leader_topic, faust_topics
from topology import TaskId, TopicPartition, Topology, TopologyBuilder

APP = "fx"
SOURCE = "clicks"
CHANGELOG = "fx-counts-changelog"
LEADER = faust_leader_topic(APP)
COUNTS = {SOURCE: 4, CHANGELOG: 4, LEADER: 1}


def topology() -> Topology:
    builder = TopologyBuilder(APP)
    builder.stream(SOURCE).store("counts")
    return builder.build()


class _Cluster:
    """The one method of aiokafka's ClusterMetadata faust's leader calls."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        self._counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self._counts.get(topic)
        return None if n is None else set(range(n))


def faust_member(url: str, replicas: int = 1) -> PartitionAssignor:
    app = faust.App(APP, broker="kafka://127.0.0.1:1", canonical_url=url, table_standby_replicas=replicas)
    app.Table("counts", default=int, partitions=4)
    return PartitionAssignor(app, replicas=replicas)


def faust_join(assignor: PartitionAssignor) -> bytes:
    return bytes(assignor.metadata({SOURCE, CHANGELOG, LEADER}).encode())


def ours(url: str = "streamtasks://w1/", replicas: int = 1) -> FaustProtocolAssignor:
    return FaustProtocolAssignor(topology(), url=url, replicas=replicas)


def ours_join(a: FaustProtocolAssignor, previous: tuple[TopicPartition, ...] = ()) -> bytes:
    return a.join_metadata(faust_topics(topology()), previous)


def run_faust_leader(leader: PartitionAssignor, members: Mapping[str, bytes]) -> dict[str, Any]:
    decoded = {m: ConsumerProtocolMemberMetadata.decode(b) for m, b in members.items()}
    return dict(leader._perform_assignment(_Cluster(COUNTS), decoded))


def test_faust_topics_match_what_a_faust_app_subscribes() -> None:
    assert faust_topics(topology()) == tuple(sorted((SOURCE, CHANGELOG, LEADER)))


def test_is_a_foreign_protocol_eager_assignor() -> None:
    a = ours()
    assert isinstance(a, ForeignProtocolAssignor)
    assert a.supported_protocols() == (RebalanceProtocol.EAGER,)
    with pytest.raises(AssignorError):
        a.assign(None)  # type: ignore[arg-type]


def test_join_metadata_is_a_faust_subscription_faust_reads() -> None:
    data = ours_join(ours())
    faust_view = ConsumerProtocolMemberMetadata.decode(data)
    assert faust_view.version == 4
    assert sorted(faust_view.subscription) == sorted(faust_topics(topology()))
    assert decode_faust_subscription(data).metadata.url == "streamtasks://w1/"


def test_faust_leader_assigns_a_streamtasks_member_which_reads_its_answer() -> None:
    f1 = faust_member("http://f1:6066/")
    mine = ours()
    answers = run_faust_leader(f1, {"a-faust": faust_join(f1), "b-streamtasks": ours_join(mine)})
    raw = bytes(answers["b-streamtasks"].encode())
    # The member reads the partitions with the consumer protocol layout, the tasks from the userdata.
    got = decode_assignment(raw)
    info = mine.read_assignment(got.user_data or b"")
    sources = {tp.partition for tp in got.assigned_partitions if tp.topic == SOURCE}
    assert len(sources) == 2
    # One replica, two members: every source partition this member does not run is its standby.
    assert info.standby_tasks == frozenset(TaskId(0, p) for p in range(4) if p not in sources)
    # And faust's own member logic accepts the same bytes for the faust member.
    f1.on_assignment(ConsumerProtocolMemberAssignment.decode(bytes(answers["a-faust"].encode())))


def test_streamtasks_leader_answers_faust_members_faust_accepts() -> None:
    f1, f2 = faust_member("http://f1:6066/"), faust_member("http://f2:6066/")
    mine = ours()
    members = (
        JoinGroupMember(member_id="a", group_instance_id=None, metadata=faust_join(f1)),
        JoinGroupMember(member_id="b", group_instance_id=None, metadata=faust_join(f2)),
        JoinGroupMember(member_id="c", group_instance_id=None, metadata=ours_join(mine)),
    )
    result = lead(members, assignor=mine, partitions_per_topic=COUNTS)  # through the classic leader hook
    assert result.problems == ()
    by_member = {a.member_id: a.assignment for a in result.assignments}
    # faust's member-side check (partitions == actives + changelog standbys, in order; own url).
    f1.on_assignment(ConsumerProtocolMemberAssignment.decode(by_member["a"]))
    f2.on_assignment(ConsumerProtocolMemberAssignment.decode(by_member["b"]))
    actives = [f1.assigned_actives(), f2.assigned_actives()]
    info = mine.read_assignment(decode_assignment(by_member["c"]).user_data or b"")
    mine_sources = {tp for tp in result.assignment["c"] if tp.topic == SOURCE}
    faust_sources = {(tp.topic, tp.partition) for a in actives for tp in a if tp.topic == SOURCE}
    # Every source partition runs exactly once.
    assert len(faust_sources) + len(mine_sources) == 4
    assert not faust_sources & {(tp.topic, tp.partition) for tp in mine_sources}
    assert all(t.partition not in {tp.partition for tp in mine_sources} for t in info.standby_tasks)
    assert result.group_topics == faust_topics(topology())
    assert not result.followup_needed


def test_join_reports_the_held_assignment_and_nothing_after_a_loss() -> None:
    f1 = faust_member("http://f1:6066/")
    mine = ours()
    answers = run_faust_leader(f1, {"a": faust_join(f1), "b": ours_join(mine)})
    got = decode_assignment(bytes(answers["b"].encode()))
    mine.read_assignment(got.user_data or b"")
    held = decode_faust_subscription(ours_join(mine, got.assigned_partitions)).metadata
    assert {p for p in held.actives[SOURCE]} == {
        tp.partition for tp in got.assigned_partitions if tp.topic == SOURCE
    }
    lost = decode_faust_subscription(ours_join(mine, ())).metadata
    assert dict(lost.actives) == {}
    assert dict(lost.standbys) == {}


def test_join_protocols_offers_faust_first_in_its_own_layout() -> None:
    mine = ours()
    config = MemberConfig(group_id=APP, topics=faust_topics(topology()), assignors=(mine,))
    (offer,) = join_protocols(
        config, topics=config.topics, owned=(), owned_generation=-1, previous=(), previous_generation=-1
    )
    assert offer.name == "faust"
    assert ConsumerProtocolMemberMetadata.decode(offer.metadata).version == 4


def test_undecodable_member_gets_an_empty_assignment_and_a_problem() -> None:
    mine = ours()
    members = (
        JoinGroupMember(member_id="a", group_instance_id=None, metadata=b"\x00\x04garbage"),
        JoinGroupMember(member_id="b", group_instance_id=None, metadata=ours_join(mine)),
    )
    result = lead(members, assignor=mine, partitions_per_topic=COUNTS)
    assert result.assignment["a"] == ()
    assert len(result.assignment["b"]) == 4 + 4 + 1  # every source, changelog and leader partition
    assert any("undecodable" in p for p in result.problems)


def test_missing_topic_counts_are_reported() -> None:
    mine = ours()
    result = lead(
        (JoinGroupMember(member_id="a", group_instance_id=None, metadata=ours_join(mine)),),
        assignor=mine,
        partitions_per_topic={SOURCE: 4},
    )
    assert any("no partition count" in p for p in result.problems)
    assert {tp.topic for tp in result.assignment["a"]} == {SOURCE}


def test_read_assignment_rejects_bytes_that_are_not_faust() -> None:
    with pytest.raises(DecodeError):
        ours().read_assignment(b"not zlib")


# -- the algorithm against faust's, scenario by scenario ----------------------------------------


def _faust_answer(
    replicas: int, members: Mapping[str, FaustMemberInput], urls: Mapping[str, str]
) -> dict[str, Any]:
    leader = faust_member("http://leader:1/", replicas)
    data = {}
    for m, inp in members.items():
        meta = ours(urls[m], replicas)
        meta._held = meta._held.__class__(url=urls[m], actives=inp.actives, standbys=inp.standbys)
        data[m] = ours_join(meta, (TopicPartition(SOURCE, 0),))
    out = run_faust_leader(leader, data)
    from faust.assignor.client_assignment import ClientMetadata

    return {
        m: ClientMetadata.loads(PartitionAssignor._decompress(a.user_data)).assignment for m, a in out.items()
    }


SCENARIOS: dict[str, dict[str, tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]]] = {
    "fresh-3": {"a": ({}, {}), "b": ({}, {}), "c": ({}, {})},
    "sticky-2": {"a": ({SOURCE: (2, 3)}, {SOURCE: (0,)}), "b": ({SOURCE: (0, 1)}, {SOURCE: (3,)})},
    "joiner": {
        "a": ({SOURCE: (0, 1)}, {SOURCE: (2, 3)}),
        "b": ({SOURCE: (2, 3)}, {SOURCE: (0, 1)}),
        "c": ({}, {}),
    },
    "zombie": {"a": ({SOURCE: (0, 1, 2)}, {}), "b": ({SOURCE: (1, 2, 3)}, {})},
}


@pytest.mark.parametrize("replicas", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_answer_as_faust(name: str, replicas: int) -> None:
    topics = faust_topics(topology())
    members = {
        m: FaustMemberInput(
            topics=topics,
            actives={t: a.get(SOURCE, ()) for t in (SOURCE, CHANGELOG)} if a else {},
            standbys={t: s.get(SOURCE, ()) for t in (SOURCE, CHANGELOG)} if s else {},
        )
        for m, (a, s) in SCENARIOS[name].items()
    }
    urls = {m: f"http://{m}:1/" for m in members}
    theirs = _faust_answer(replicas, members, urls)
    mine, groups = faust_assign(members, COUNTS, replicas=replicas)
    assert groups == {LEADER: 0, CHANGELOG: 1, SOURCE: 1}
    for m in members:
        for topic in (SOURCE, CHANGELOG):
            assert sorted(theirs[m].actives[topic]) == list(mine[m].actives[topic]), (m, topic)
            assert sorted(theirs[m].standbys[topic]) == list(mine[m].standbys[topic]), (m, topic)


def test_every_partition_active_once_and_standbys_apart() -> None:
    topics = (SOURCE,)
    members = {f"m{i}": FaustMemberInput(topics=topics) for i in range(5)}
    out, _ = faust_assign(members, {SOURCE: 12}, replicas=2)
    actives = sorted(p for o in out.values() for p in o.actives[SOURCE])
    assert actives == list(range(12))
    for o in out.values():
        assert not set(o.actives[SOURCE]) & set(o.standbys[SOURCE])
    assert sorted(p for o in out.values() for p in o.standbys[SOURCE]) == sorted(list(range(12)) * 2)


def test_deterministic_and_rejects_negative_replicas() -> None:
    members = {f"m{i}": FaustMemberInput(topics=(SOURCE,)) for i in range(3)}
    assert faust_assign(members, {SOURCE: 7}, replicas=1) == faust_assign(
        dict(reversed(members.items())), {SOURCE: 7}, replicas=1
    )
    with pytest.raises(AssignorError):
        faust_assign(members, {SOURCE: 7}, replicas=-1)


def test_the_faust_assignor_is_not_taken_for_an_assignment_listener() -> None:
    # Its reader takes faust's bytes, not the MemberAssignment the hook would hand it.
    assert not isinstance(ours(), AssignmentListener)
