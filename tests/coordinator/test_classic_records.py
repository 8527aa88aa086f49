"""The classic member metadata in the member record (tag 0 of its value, as Kafka's
``ClassicMemberMetadata``): round trip, records written before it still read, and loading a
group rearms a classic member's session with its own session timeout."""

from __future__ import annotations

import pytest

from streamtasks.coordinator import GroupCoordinator, MemberMetadataRecord, TimerKey, TimerKind
from streamtasks.coordinator.record_codec import decode_log_record, encode_log_record
from streamtasks.coordinator.records import ClassicMemberMetadata
from streamtasks.errors import DecodeError
from tests.coordinator.classic_support import ClassicHarness
from tests.coordinator.support import GROUP

CLASSIC = ClassicMemberMetadata(
    session_timeout_ms=12_000, protocols=(("cooperative-sticky", b"\x00\x03sub"), ("range", b""))
)
PLAIN = MemberMetadataRecord(
    group_id=GROUP, member_id="m", subscribed_topic_names=("foo",), rebalance_timeout_ms=5_000
)


def test_classic_metadata_round_trips() -> None:
    record = MemberMetadataRecord(
        group_id=GROUP, member_id="m", subscribed_topic_names=("foo",), classic=CLASSIC
    )
    key, value = encode_log_record(record)
    assert value is not None
    assert decode_log_record(key, value) == record


def test_a_record_without_it_is_unchanged_and_reads_as_a_consumer_protocol_member() -> None:
    key, value = encode_log_record(PLAIN)
    assert value is not None
    assert value.endswith(b"\x00")  # an empty tagged-field section, as before
    decoded = decode_log_record(key, value)
    assert isinstance(decoded, MemberMetadataRecord)
    assert decoded.classic is None
    # the classic record is the plain one plus the tag: old readers skip the unknown tag
    _, with_tag = encode_log_record(
        MemberMetadataRecord(
            group_id=GROUP,
            member_id="m",
            subscribed_topic_names=("foo",),
            rebalance_timeout_ms=5_000,
            classic=CLASSIC,
        )
    )
    assert with_tag is not None
    assert with_tag.startswith(value[:-1])


def test_truncated_classic_metadata_is_a_decode_error() -> None:
    record = MemberMetadataRecord(group_id=GROUP, member_id="m", classic=CLASSIC)
    key, value = encode_log_record(record)
    assert value is not None
    for cut in range(len(value) - 12, len(value)):
        with pytest.raises(DecodeError):
            decode_log_record(key, value[:cut])


def test_load_rearms_a_classic_session_with_its_own_timeout() -> None:
    h = ClassicHarness()
    h.add("a")
    h.cjoin("a")
    h.join("m1")
    h.settle_all()
    member_id = h.classic["a"].member_id
    fresh = GroupCoordinator(
        h.coordinator.config, assignors=h.coordinator.assignors, image=h.coordinator.image
    )
    fresh.apply(fresh.load(h.log, 100_000))
    assert fresh.timer_deadline(TimerKey(TimerKind.SESSION, GROUP, member_id)) == 110_000
    assert fresh.timer_deadline(TimerKey(TimerKind.SESSION, GROUP, "m1")) == 100_000 + 45_000
    assert fresh.snapshot() == h.coordinator.snapshot()
