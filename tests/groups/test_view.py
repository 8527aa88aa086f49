"""``streamtasks groups``' decoding and rendering (pure: no broker)."""

from __future__ import annotations

import json
import uuid

import pytest

from streamtasks.errors import DecodeError
from streamtasks.groups.view import (
    STREAMTASKS_PROTOCOL,
    ClassicGroupView,
    classic_group_view,
    consumer_group_view,
    render_classic,
    render_consumer,
    render_listing,
)
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol import consumer_group as kip848
from streamtasks.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    encode_assignment,
    encode_subscription,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.userdata import (
    AssignmentInfo,
    SubscriptionInfo,
    encode_assignment_info,
    encode_subscription_info,
)
from streamtasks.runtime.group_admin import GroupListing
from topology.ids import TaskId, TopicPartition

PROCESS = uuid.UUID("00000000-0000-4000-8000-000000000001")


def _streamtasks_member(
    member_id: str, partitions: tuple[int, ...], info: AssignmentInfo
) -> cg.DescribedMember:
    sub = SubscriptionInfo(process_id=PROCESS, endpoint="host-a:8080")
    metadata = encode_subscription(
        ConsumerProtocolSubscription(topics=("words",), user_data=encode_subscription_info(sub))
    )
    assignment = encode_assignment(
        ConsumerProtocolAssignment(
            assigned_partitions=tuple(TopicPartition("words", p) for p in partitions),
            user_data=encode_assignment_info(info),
        )
    )
    return cg.DescribedMember(
        member_id=member_id, client_id=f"client-{member_id}", client_host="/10.0.0.1", metadata=metadata,
        assignment=assignment,
    )  # fmt: skip


def _classic(
    members: tuple[cg.DescribedMember, ...], protocol: str = STREAMTASKS_PROTOCOL
) -> ClassicGroupView:
    response = cg.DescribeGroupResponse(
        error=KafkaErrorCode.NONE, group_state="Stable", protocol_type="consumer", protocol_name=protocol,
        members=members,
    )  # fmt: skip
    return classic_group_view("app", response)


def test_a_streamtasks_member_shows_its_partitions_and_tasks_by_role() -> None:
    info = AssignmentInfo(
        active_tasks=frozenset({TaskId(0, 1), TaskId(0, 0)}),
        standby_tasks=frozenset({TaskId(0, 2)}),
        warmup_tasks=frozenset({TaskId(0, 3)}),
    )
    view = _classic((_streamtasks_member("m1", (1, 0), info),))
    member = view.members[0]
    assert member.partitions == (TopicPartition("words", 0), TopicPartition("words", 1))
    assert member.tasks is not None
    assert [str(t) for t in member.tasks.active] == ["0_0", "0_1"]
    assert member.process_id == str(PROCESS)
    assert member.endpoint == "host-a:8080"
    assert view.to_json()["members"][0]["tasks"] == {
        "active": ["0_0", "0_1"],
        "standby": ["0_2"],
        "warmup": ["0_3"],
    }
    text = render_classic(view)
    assert (
        text.splitlines()[0]
        == "group app: classic, state Stable, protocol type consumer, protocol streamtasks, 1 member(s)"
    )
    assert text.splitlines()[1].split() == [
        "MEMBER", "INSTANCE", "CLIENT-ID", "HOST", "PARTITIONS", "ACTIVE", "STANDBY", "WARMUP",
    ]  # fmt: skip
    assert text.splitlines()[2].split() == [
        "m1",
        "-",
        "client-m1",
        "/10.0.0.1",
        "words-0,words-1",
        "0_0,0_1",
        "0_2",
        "0_3",
    ]
    assert render_classic(view, members=False) == text.splitlines()[0]


def test_members_are_sorted_and_the_json_is_stable() -> None:
    empty = AssignmentInfo()
    a = _classic((_streamtasks_member("m2", (), empty), _streamtasks_member("m1", (0,), empty)))
    b = _classic((_streamtasks_member("m1", (0,), empty), _streamtasks_member("m2", (), empty)))
    assert [m.member_id for m in a.members] == ["m1", "m2"]
    assert json.dumps(a.to_json(), sort_keys=True) == json.dumps(b.to_json(), sort_keys=True)
    assert "words-0" in render_classic(a)
    assert " - " in render_classic(a)  # m2 has no partition


def test_another_assignor_shows_partitions_without_reading_its_userdata() -> None:
    assignment = encode_assignment(
        ConsumerProtocolAssignment(assigned_partitions=(TopicPartition("t", 3),), user_data=b"\xffnot ours")
    )
    metadata = encode_subscription(ConsumerProtocolSubscription(topics=("t",), user_data=b"\xff"))
    view = _classic((cg.DescribedMember(member_id="m", assignment=assignment, metadata=metadata),), "range")
    assert view.members[0].partitions == (TopicPartition("t", 3),)
    assert view.members[0].tasks is None
    assert "ACTIVE" not in render_classic(view)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("assignment", b"\x00\x03\x00", "bad assignment"),
        ("metadata", b"\x00", "bad subscription"),
        (
            "assignment",
            encode_assignment(
                ConsumerProtocolAssignment(assigned_partitions=(), user_data=b"\x00\x00\x00\x09")
            ),
            "bad streamtasks assignment userdata",
        ),
    ],
)
def test_bad_bytes_in_a_member_are_one_decode_error_naming_group_member_and_field(
    field: str, value: bytes, named: str
) -> None:
    member = (
        cg.DescribedMember(member_id="m-bad", assignment=value)
        if field == "assignment"
        else cg.DescribedMember(member_id="m-bad", metadata=value)
    )
    with pytest.raises(DecodeError, match=f"group 'app', member 'm-bad': {named}"):
        _classic((member,))


def _tps(topic: str, partitions: tuple[int, ...]) -> kip848.DescribedAssignment:
    return kip848.DescribedAssignment(
        topic_partitions=(
            kip848.DescribedTopicPartitions(
                topic_id=uuid.UUID(int=7), topic_name=topic, partitions=partitions
            ),
        )
    )


def test_a_consumer_group_shows_epochs_and_current_against_target() -> None:
    member = kip848.DescribedMember(
        member_id="abc", member_epoch=5, client_id="c1", client_host="/127.0.0.1",
        assignment=_tps("t", (1, 0)), target_assignment=_tps("t", (0,)), rack_id="r1",
    )  # fmt: skip
    group = kip848.DescribedGroup(
        error=KafkaErrorCode.NONE, group_id="g", group_state="Reconciling", group_epoch=6, assignment_epoch=6,
        assignor_name="uniform", members=(member,),
    )  # fmt: skip
    view = consumer_group_view(group)
    assert view.to_json()["members"][0]["current_assignment"] == ["t-0", "t-1"]
    assert view.to_json()["members"][0]["target_assignment"] == ["t-0"]
    lines = render_consumer(view).splitlines()
    assert lines[0] == (
        "group g: consumer (KIP-848), state Reconciling, group epoch 6, assignment epoch 6, "
        "assignor uniform, 1 member(s)"
    )
    assert lines[2].split() == ["abc", "-", "c1", "/127.0.0.1", "r1", "5", "t-0,t-1", "t-0"]


def test_the_listing_is_a_table_or_says_there_is_no_group() -> None:
    assert render_listing([]) == "no groups"
    rows = [GroupListing(group_id="g1", group_type="classic", protocol_type="consumer", state="Stable")]
    assert render_listing(rows).splitlines()[1].split() == ["g1", "classic", "consumer", "Stable"]
    assert rows[0].to_json() == {
        "group_id": "g1",
        "type": "classic",
        "protocol_type": "consumer",
        "state": "Stable",
    }


def test_a_kafka_streams_member_is_read_from_kafka_streams_userdata_and_bad_bytes_name_it() -> None:
    import struct

    def i32(*values: int) -> bytes:
        return struct.pack(f">{len(values)}i", *values)

    subscription = i32(11, 11) + PROCESS.bytes + i32(6) + b"h:9000" + i32(0) + b"\x00" + i32(0) + i32(0)
    assignment = (
        i32(11, 11) + i32(1) + i32(0, 1, 0) + i32(1) + i32(1, 0, 0) + i32(0) + i32(0) + i32(0) + i32(0)
    )
    assignment += i32(0) + struct.pack(">q", -1)
    member = cg.DescribedMember(
        member_id="j1", client_id="java", client_host="/h",
        metadata=encode_subscription(ConsumerProtocolSubscription(topics=("in",), user_data=subscription)),
        assignment=encode_assignment(
            ConsumerProtocolAssignment(assigned_partitions=(TopicPartition("in", 1),), user_data=assignment)
        ),
    )  # fmt: skip
    view = _classic((member,), protocol="stream")
    (seen,) = view.to_json()["members"]
    assert seen["tasks"] == {"active": ["0_1"], "standby": ["1_0"], "warmup": []}
    assert seen["process_id"] == str(PROCESS)
    assert seen["endpoint"] == "h:9000"
    broken = cg.DescribedMember(
        member_id="j2", client_id="java", client_host="/h", metadata=b"",
        assignment=encode_assignment(
            ConsumerProtocolAssignment(assigned_partitions=(), user_data=i32(11, 11) + i32(5))
        ),
    )  # fmt: skip
    with pytest.raises(DecodeError, match="group 'app', member 'j2': bad Kafka Streams assignment userdata"):
        _classic((broken,), protocol="stream")
