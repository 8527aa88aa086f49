"""One kind of group per id and the offline conversions (``coordinator/kinds.py``): what a
streams heartbeat meets on a consumer (classic) group's id, and what a JoinGroup or a
ConsumerGroupHeartbeat meets on a streams group's id."""

from __future__ import annotations

from streamtasks.coordinator.kinds import KindCheck, for_consumer_write, for_streams_heartbeat
from streamtasks.coordinator.streams import StreamsGroupCoordinator
from streamtasks.protocol.errors import KafkaErrorCode
from tests.coordinator.classic_support import ClassicHarness
from tests.coordinator.streams.support import GROUP, Harness
from tests.coordinator.support import GROUP as CLASSIC_GROUP


def test_a_streams_heartbeat_converts_an_empty_classic_group_and_refuses_one_with_members() -> None:
    classic = ClassicHarness()
    assert for_streams_heartbeat(classic.coordinator, CLASSIC_GROUP) == KindCheck()  # no group
    classic.add("a")
    classic.cjoin("a")
    classic.settle_all()
    refused = for_streams_heartbeat(classic.coordinator, CLASSIC_GROUP)
    assert refused.error is KafkaErrorCode.GROUP_ID_NOT_FOUND
    assert "a classic group of this id still has 1 member(s)" in refused.message
    classic.cleave("a")
    assert for_streams_heartbeat(classic.coordinator, CLASSIC_GROUP) == KindCheck(convert=True)


def test_a_join_converts_an_empty_streams_group_a_consumer_heartbeat_never_does() -> None:
    h = Harness()
    assert for_consumer_write(h.coordinator, GROUP, classic_join=True) == KindCheck()
    a = h.add("a")
    h.round(2)
    busy = for_consumer_write(h.coordinator, GROUP, classic_join=True)
    assert busy.error is KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL
    a.epoch = -1
    h.beat(a)
    assert for_consumer_write(h.coordinator, GROUP, classic_join=True) == KindCheck(convert=True)
    kip848 = for_consumer_write(h.coordinator, GROUP, classic_join=False)
    assert kip848.error is KafkaErrorCode.GROUP_ID_NOT_FOUND
    assert for_consumer_write(StreamsGroupCoordinator(), GROUP, classic_join=False) == KindCheck()
