"""faust's assignor protocol: bytes equal faust-streaming's own ClientMetadata JSON and aiokafka's
consumer protocol structs, and faust reads what we write."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

import pytest
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from faust.assignor.client_assignment import ClientAssignment, ClientMetadata
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.errors import DecodeError
from streamtasks.protocol import (
    FaustAssignment,
    FaustClientMetadata,
    FaustSubscription,
    HostDistribution,
    decode_assignment,
    decode_faust_assignment,
    decode_faust_client_metadata,
    decode_faust_member_view,
    decode_faust_subscription,
    encode_faust_assignment,
    encode_faust_client_metadata,
    encode_faust_subscription,
    faust_client_metadata,
)
from streamtasks.protocol.faust_compat import MAX_INFLATED_SIZE
from tests.protocol import strategies as S
from topology.ids import TopicPartition


def faust_own(meta: FaustClientMetadata) -> ClientMetadata:
    """faust's ClientMetadata with the same content, mappings in sorted key order."""

    def tps(m: Mapping[str, tuple[int, ...]]) -> dict[str, list[int]]:
        return {t: list(m[t]) for t in sorted(m)}

    return ClientMetadata(
        assignment=ClientAssignment(actives=tps(meta.actives), standbys=tps(meta.standbys)),
        url=meta.url,
        changelog_distribution={
            h: tps(meta.changelog_distribution[h]) for h in sorted(meta.changelog_distribution)
        },
        external_topic_distribution={
            h: tps(meta.external_topic_distribution[h]) for h in sorted(meta.external_topic_distribution)
        },
        topic_groups={t: meta.topic_groups[t] for t in sorted(meta.topic_groups)},
    )


@given(meta=S.faust_metadata)
def test_client_metadata_bytes_equal_faust(meta: FaustClientMetadata) -> None:
    ours = encode_faust_client_metadata(meta)
    assert ours == faust_own(meta).dumps()
    assert decode_faust_client_metadata(ours) == meta


@given(meta=S.faust_metadata)
def test_faust_reads_what_we_write(meta: FaustClientMetadata) -> None:
    theirs = ClientMetadata.loads(encode_faust_client_metadata(meta))
    assert theirs.url == meta.url
    assert dict(theirs.topic_groups) == dict(meta.topic_groups)
    assert dict(theirs.changelog_distribution) == {
        h: {t: list(ps) for t, ps in tps.items()} for h, tps in meta.changelog_distribution.items()
    }


@given(topics=st.lists(S.topic_names, max_size=4, unique=True), meta=S.faust_metadata)
def test_subscription_bytes_equal_aiokafka(topics: list[str], meta: FaustClientMetadata) -> None:
    ours = encode_faust_subscription(FaustSubscription(topics=tuple(topics), metadata=meta))
    theirs = ConsumerProtocolMemberMetadata(4, sorted(topics), faust_own(meta).dumps()).encode()
    assert ours == theirs
    decoded = decode_faust_subscription(theirs)
    assert (decoded.topics, decoded.metadata, decoded.version) == (tuple(sorted(topics)), meta, 4)


@given(
    partitions=st.lists(S.topic_partitions(S.small_partitions), max_size=8, unique=True),
    meta=S.faust_metadata,
)
def test_assignment_bytes_equal_what_faust_sends(
    partitions: list[TopicPartition], meta: FaustClientMetadata
) -> None:
    grouped: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    theirs = ConsumerProtocolMemberAssignment(
        4, sorted(grouped.items()), zlib.compress(faust_own(meta).dumps())
    ).encode()
    ours = encode_faust_assignment(FaustAssignment(partitions=tuple(partitions), metadata=meta))
    assert ours == theirs
    decoded = decode_faust_assignment(theirs)
    assert (sorted(decoded.partitions), decoded.metadata) == (sorted(partitions), meta)


def test_consumer_protocol_decoder_reads_faust_assignments() -> None:
    meta = FaustClientMetadata(url="http://a/", actives={"t": (0,)})
    data = encode_faust_assignment(FaustAssignment(partitions=(TopicPartition("t", 0),), metadata=meta))
    generic = decode_assignment(data)
    assert (generic.version, generic.assigned_partitions) == (4, (TopicPartition("t", 0),))
    assert generic.user_data is not None
    assert decode_faust_client_metadata(zlib.decompress(generic.user_data)) == meta


def test_decoding_follows_faust_defaults() -> None:
    minimal = b'{"assignment":{"actives":{"t":[1]},"standbys":{}},"url":"u","changelog_distribution":{}}'
    meta = decode_faust_client_metadata(minimal)
    assert meta.actives == {"t": (1,)}
    assert (meta.external_topic_distribution, meta.topic_groups) == ({}, {})
    with_nulls = minimal[:-1] + b',"topic_groups":null,"external_topic_distribution":null}'
    assert decode_faust_client_metadata(with_nulls) == meta


def test_convenience_builder() -> None:
    data = faust_client_metadata(url="http://a/", actives={"t": [3, 1]}, topic_groups={"t": 0})
    assert data == (
        b'{"assignment":{"actives":{"t":[3,1]},"standbys":{}},"url":"http://a/",'
        b'"changelog_distribution":{},"external_topic_distribution":{},"topic_groups":{"t":0}}'
    )


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b'{"assignment":{"actives":{},"standbys":{}},"url":5,"changelog_distribution":{}}',
        b'{"assignment":{"actives":{"t":[true]},"standbys":{}},"url":"u","changelog_distribution":{}}',
        b'{"assignment":{"actives":{"t":[4294967296]},"standbys":{}},"url":"u","changelog_distribution":{}}',
        b'{"assignment":{"actives":{},"standbys":{}},"url":"u"}',
        b"[" * 100_000,
        b"\xff\xfe",
    ],
)
def test_bad_client_metadata_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_faust_client_metadata(data)


def _with_changelogs(distribution: bytes) -> bytes:
    return (
        b'{"assignment":{"actives":{},"standbys":{}},"url":"u","changelog_distribution":'
        + distribution
        + b"}"
    )


@pytest.mark.parametrize(
    ("distribution", "named"),
    [
        (b'{"h1":{},"h2":{"t":[0,true]}}', r"changelog_distribution\[h2\]\[t\] must be int"),
        (b'{"h1":{"t":[2147483648]}}', r"changelog_distribution\[h1\]\[t\] = 2147483648 does not fit"),
        (b'{"h1":{"t":[-2147483649]}}', r"changelog_distribution\[h1\]\[t\] = -2147483649 does not fit"),
        (b'{"h1":{"t":"0"}}', r"changelog_distribution\[h1\]\[t\] must be list"),
        (b'{"h1":[]}', r"changelog_distribution\[h1\] must be dict"),
        (b'{"h1":{"t":[1.5]}}', r"changelog_distribution\[h1\]\[t\] must be int"),
    ],
)
def test_a_bad_host_distribution_names_the_host_and_topic(distribution: bytes, named: str) -> None:
    with pytest.raises(DecodeError, match=named):
        decode_faust_client_metadata(_with_changelogs(distribution))


def test_int32_bounds_of_a_host_distribution_are_accepted() -> None:
    meta = decode_faust_client_metadata(_with_changelogs(b'{"h":{"t":[-2147483648,2147483647]},"e":{}}'))
    assert meta.changelog_distribution == {"h": {"t": (-2147483648, 2147483647)}, "e": {}}


def test_one_distribution_shared_by_many_members_is_written_once() -> None:
    """A leader builds the distribution once; every member's metadata holds that same object,
    whose JSON is computed at the first member and reused, bytes unchanged."""
    shared = HostDistribution({f"http://h{i}/": {"c": [i]} for i in range(50)})
    metas = [FaustClientMetadata(url=f"http://h{i}/", changelog_distribution=shared) for i in range(50)]
    assert all(m.changelog_distribution is shared for m in metas)
    for meta in metas:
        data = encode_faust_client_metadata(meta)
        assert data == faust_own(meta).dumps()
        assert decode_faust_client_metadata(data) == meta
    assert shared.json_text() is shared.json_text()


def test_a_host_distribution_is_immutable_and_copies_its_input() -> None:
    source = {"h": {"t": [1, 2]}}
    hosts = HostDistribution(source)
    source["h"]["t"].append(3)
    assert hosts == {"h": {"t": (1, 2)}}
    assert HostDistribution.of(hosts) is hosts
    with pytest.raises(TypeError):
        hosts["x"] = {}  # type: ignore[index]


@given(meta=S.faust_metadata)
def test_a_member_view_has_the_full_decoders_own_fields(meta: FaustClientMetadata) -> None:
    data = zlib.compress(encode_faust_client_metadata(meta))
    view = decode_faust_member_view(data)
    assert (view.url, view.actives, view.standbys) == (meta.url, meta.actives, meta.standbys)


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        (
            b'{"assignment":{"actives":{"t":[true]},"standbys":{}},"url":"u","changelog_distribution":{}}',
            "actives",
        ),
        (
            b'{"assignment":{"actives":{},"standbys":{"t":[1e3]}},"url":"u","changelog_distribution":{}}',
            "standbys",
        ),
        (b'{"assignment":{"actives":{},"standbys":{}},"url":null,"changelog_distribution":{}}', "url"),
        (b'{"assignment":[],"url":"u"}', "assignment must be dict"),
        (b'{"url":"u"}', "assignment must be dict"),
        (b'{"assignment":{"actives":{},"standbys":{}}}', "url must be str"),
        (b'{"assignment":{"actives":{},"standbys":{}} "url":"u"}', "not JSON"),
        (b'{"assignment":{"actives":{},"standbys":{}},"url":"u', "not JSON"),
        (b'{"assignment":{"actives":{},"standbys":{}},"url":"u\xff"}', "not JSON"),
        (b"[]", "the document"),
        (b"", "not JSON"),
    ],
)
def test_a_member_view_of_bad_bytes_is_a_decode_error(doc: bytes, named: str) -> None:
    with pytest.raises(DecodeError, match=named):
        decode_faust_member_view(zlib.compress(doc))


@pytest.mark.parametrize(
    "tail",
    [
        b',"changelog_distribution":{"h":{"t":[true]}}}',
        b',"changelog_distribution":[]}',
        b"}",
        b',"changelog_distribution":{"h":',
        b", garbage",
    ],
)
def test_a_member_view_stops_reading_after_its_own_fields(tail: bytes) -> None:
    """The documented limit of the view: what follows the member's own fields is not read (the
    full decoder refuses every one of these documents)."""
    doc = b'{"assignment":{"actives":{"t":[1]},"standbys":{}},"url":"u"' + tail
    view = decode_faust_member_view(zlib.compress(doc))
    assert (view.url, dict(view.actives)) == ("u", {"t": (1,)})
    with pytest.raises(DecodeError):
        decode_faust_client_metadata(doc)


def test_a_member_view_of_fields_in_another_order_reads_up_to_the_later_of_them() -> None:
    tail = b'"url":"u","assignment":{"actives":{},"standbys":{"t":[2]}}}'
    assert decode_faust_member_view(zlib.compress(b'{"changelog_distribution":{},' + tail)).standbys == {
        "t": (2,)
    }
    with pytest.raises(DecodeError, match="not JSON"):
        decode_faust_member_view(zlib.compress(b'{"changelog_distribution":{"h":},' + tail))


def test_inflating_stops_at_the_limit() -> None:
    deflater = zlib.compressobj()
    chunk = bytes(1 << 20)
    bomb = b"".join(deflater.compress(chunk) for _ in range(MAX_INFLATED_SIZE // len(chunk) + 2))
    bomb += deflater.flush()
    assert len(bomb) < 200_000
    data = ConsumerProtocolMemberAssignment(4, [], bomb).encode()
    with pytest.raises(DecodeError, match="inflates beyond"):
        decode_faust_assignment(data)
    truncated = ConsumerProtocolMemberAssignment(4, [], zlib.compress(b"{}")[:-3]).encode()
    with pytest.raises(DecodeError, match="truncated zlib"):
        decode_faust_assignment(truncated)
