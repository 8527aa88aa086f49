"""streamtasks.faust.StreamtasksAssignor inside real faust apps (no broker: the leader step and
each member's own check of its assignment run on the bytes the members exchange)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import faust
import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from faust.assignor import PartitionAssignor

from streamtasks.errors import ConfigError
from streamtasks.faust import StreamtasksAssignor, configured
from topology import TopicPartition

SOURCE = "clicks"
CHANGELOG = "fx-counts-changelog"
LEADER = "fx-__assignor-__leader"
COUNTS = {SOURCE: 4, CHANGELOG: 4, LEADER: 1}


class _Cluster:
    """The one method of aiokafka's ClusterMetadata faust's leader calls."""

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = COUNTS.get(topic)
        return None if n is None else set(range(n))


def member(url: str, cls: type[PartitionAssignor] = StreamtasksAssignor) -> PartitionAssignor:
    app = faust.App("fx", broker="kafka://127.0.0.1:1", canonical_url=url, PartitionAssignor=cls)
    app.Table("counts", default=int, partitions=4)
    assignor = app.assignor
    assert isinstance(assignor, cls)
    return assignor


def join(a: PartitionAssignor) -> bytes:
    return bytes(a.metadata({SOURCE, CHANGELOG, LEADER}).encode())


def rebalance(leader: PartitionAssignor, members: Mapping[str, PartitionAssignor]) -> dict[str, Any]:
    """Leader step over every member's join bytes, then each member's own on_assignment."""
    metadata = {m: ConsumerProtocolMemberMetadata.decode(join(a)) for m, a in members.items()}
    answers = leader._perform_assignment(_Cluster(), metadata)

    async def apply() -> None:
        for m, a in members.items():
            a.on_assignment(ConsumerProtocolMemberAssignment.decode(bytes(answers[m].encode())))

    asyncio.run(apply())
    return dict(answers)


def test_the_app_uses_it_and_its_join_is_faust_readable_with_streamtasks_fields() -> None:
    a = member("http://a:1/")
    doc = json.loads(ConsumerProtocolMemberMetadata.decode(join(a)).user_data)
    assert doc["url"] == "http://a:1/"
    assert set(doc["streamtasks"]) == {"offsets", "highwaters"}


def test_two_workers_split_actives_and_accept_the_answer() -> None:
    a, b = member("http://a:1/"), member("http://b:1/")
    rebalance(a, {"m-a": a, "m-b": b})
    assert a.last_placement is not None
    assert a.last_placement.problems == ()
    actives = [{tp.partition for tp in x.assigned_actives() if tp.topic == SOURCE} for x in (a, b)]
    assert actives[0] | actives[1] == {0, 1, 2, 3}
    assert not actives[0] & actives[1]


def test_a_plain_faust_leader_reads_streamtasks_members() -> None:
    plain = member("http://p:1/", PartitionAssignor)
    ours = member("http://o:1/")
    rebalance(plain, {"m-p": plain, "m-o": ours})
    got = {tp.partition for x in (plain, ours) for tp in x.assigned_actives() if tp.topic == SOURCE}
    assert got == {0, 1, 2, 3}


def test_warmups_reach_the_member_and_it_watches_them() -> None:
    a, b = member("http://a:1/"), member("http://b:1/")
    # a held everything and its store says it is at the end; b is new.
    a._assignment = a._assignment.__class__(
        actives={SOURCE: [0, 1, 2, 3], CHANGELOG: [0, 1, 2, 3], LEADER: [0]}, standbys={}
    )
    positions = {(CHANGELOG, p): 999 for p in range(4)}
    a._changelog_positions = lambda: {TopicPartition(t, p): o for (t, p), o in positions.items()}  # type: ignore[method-assign]
    a._highwaters = {TopicPartition(CHANGELOG, p): 1_000 for p in range(4)}
    answers = rebalance(a, {"m-a": a, "m-b": b})
    placement = a.last_placement
    assert placement.warmups["m-b"], placement
    assert {tp.partition for tp in a.assigned_actives() if tp.topic == SOURCE} == {0, 1, 2, 3}
    doc = json.loads(PartitionAssignor._decompress(answers["m-b"].user_data))
    assert doc["streamtasks"]["warmups"]
    assert b._warmups == placement.warmups["m-b"]


def test_configured_makes_a_subclass_and_refuses_unknown_settings() -> None:
    cls = configured(acceptable_recovery_lag=5)
    assert issubclass(cls, StreamtasksAssignor)
    assert cls.acceptable_recovery_lag == 5
    with pytest.raises(ConfigError):
        configured(no_such=1)
