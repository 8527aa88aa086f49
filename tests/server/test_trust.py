"""What a secured listener forwards: Metadata with auto-creation and authorized operations off,
its answer filtered by the client's topic rights; ApiVersions restricted to what is served."""

from __future__ import annotations

import datetime
import uuid

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v0 import request as meta0_req
from kio.schema.metadata.v0 import response as meta0_resp
from kio.schema.metadata.v12 import request as meta_req
from kio.schema.metadata.v12 import response as meta_resp
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta

from streamtasks.runtime.framing import encode_request
from streamtasks.server.routing import decode_kio_response
from streamtasks.server.trust import (
    FORWARDED_WHEN_GUARDED,
    filter_metadata_response,
    restrict_api_versions,
    sanitize_metadata_request,
)
from streamtasks.server.wire import decode_kio_request, encode_kio_response, parse_request


def _request(names: list[str] | None, *, auto: bool) -> bytes:
    topics = (
        None
        if names is None
        else tuple(meta_req.MetadataRequestTopic(topic_id=None, name=TopicName(n)) for n in names)
    )
    request = meta_req.MetadataRequest(
        topics=topics, allow_auto_topic_creation=auto, include_topic_authorized_operations=True
    )
    return encode_request(request, correlation_id=7, client_id="c")[4:]


def test_the_forwarded_request_cannot_create_topics_or_ask_for_operations() -> None:
    frame, all_topics = sanitize_metadata_request(_request(["a", "b"], auto=True))
    assert not all_topics
    header, body = parse_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 7, "c")
    forwarded = decode_kio_request(3, 12, body)
    assert forwarded.allow_auto_topic_creation is False
    assert forwarded.include_topic_authorized_operations is False
    assert [t.name for t in forwarded.topics] == ["a", "b"]
    assert sanitize_metadata_request(_request(None, auto=False))[1]


def test_v0_with_no_topics_means_all_topics() -> None:
    payload = encode_request(meta0_req.MetadataRequest(topics=()), correlation_id=1)[4:]
    assert sanitize_metadata_request(payload)[1]


def _topic(name: str) -> meta_resp.MetadataResponseTopic:
    partition = meta_resp.MetadataResponsePartition(
        error_code=ErrorCode(0),
        partition_index=i32(0),
        leader_id=i32(1),  # type: ignore[arg-type]
        leader_epoch=i32(0),
        replica_nodes=(i32(1),),  # type: ignore[arg-type]
        isr_nodes=(i32(1),),  # type: ignore[arg-type]
        offline_replicas=(),
    )
    return meta_resp.MetadataResponseTopic(
        error_code=ErrorCode(0),
        name=TopicName(name),
        topic_id=uuid.uuid4(),
        is_internal=False,
        partitions=(partition,),
        topic_authorized_operations=i32(-2147483648),
    )


def _response(*names: str) -> bytes:
    response = meta_resp.MetadataResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        brokers=(),
        cluster_id="c",
        controller_id=i32(1),  # type: ignore[arg-type]
        topics=tuple(_topic(n) for n in names),
    )
    return encode_kio_response(response, 7)


def test_named_topics_not_allowed_are_answered_authorization_failed() -> None:
    frame = filter_metadata_response(
        _response("mine", "theirs"), 12, all_topics=False, may_describe=lambda t: t == "mine"
    )
    _, response = decode_kio_response(3, 12, frame)
    by_name = {t.name: t for t in response.topics}
    assert by_name["mine"].error_code.value == 0
    assert len(by_name["mine"].partitions) == 1
    assert by_name["theirs"].error_code.value == 29
    assert by_name["theirs"].partitions == ()
    assert by_name["theirs"].topic_id is None  # the zero UUID on the wire, as kio reads it


def test_an_all_topics_answer_leaves_the_others_out() -> None:
    frame = filter_metadata_response(
        _response("mine", "theirs"), 12, all_topics=True, may_describe=lambda t: t == "mine"
    )
    _, response = decode_kio_response(3, 12, frame)
    assert [t.name for t in response.topics] == ["mine"]


def test_nothing_to_hide_returns_the_frame_unchanged() -> None:
    frame = _response("mine")
    assert filter_metadata_response(frame, 12, all_topics=True, may_describe=lambda t: True) is frame


def test_v0_answers_are_filtered_too() -> None:
    partition = meta0_resp.MetadataResponsePartition(
        error_code=ErrorCode(0),
        partition_index=i32(0),
        leader_id=i32(1),  # type: ignore[arg-type]
        replica_nodes=(),
        isr_nodes=(),
    )
    response = meta0_resp.MetadataResponse(
        brokers=(),
        topics=(
            meta0_resp.MetadataResponseTopic(
                error_code=ErrorCode(0), name=TopicName("x"), partitions=(partition,)
            ),
        ),
    )
    frame = filter_metadata_response(
        encode_kio_response(response, 1), 0, all_topics=False, may_describe=lambda t: False
    )
    _, filtered = decode_kio_response(3, 0, frame)
    assert filtered.topics[0].error_code.value == 29


def test_api_versions_keep_only_served_forwarded_and_sasl() -> None:
    broker = {0: (0, 11), 1: (4, 17), 3: (0, 12), 18: (0, 4), 19: (2, 7), 68: (0, 1), 17: (0, 1), 36: (0, 2)}
    assert {3, 18} == FORWARDED_WHEN_GUARDED
    assert restrict_api_versions(broker, {68}, sasl=True) == {
        3: (0, 12),
        16: (0, 5),  # ListGroups: answered by the listener itself
        18: (0, 4),
        68: (0, 1),
        17: (0, 1),
        36: (0, 2),
    }
    assert restrict_api_versions(broker, {68}, sasl=False) == {3: (0, 12), 16: (0, 5), 18: (0, 4), 68: (0, 1)}
