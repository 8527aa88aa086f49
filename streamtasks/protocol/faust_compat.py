"""faust-streaming's ``faust`` assignor protocol, on the wire (no faust import).

faust's ``PartitionAssignor`` (name ``"faust"``, version 4) joins with aiokafka's
``ConsumerProtocolMemberMetadata``: the consumer protocol's v0 layout, but with the assignor's
version (4) in the int16 header::

    FaustSubscription => Version(=4) Topics UserData      UserData: ClientMetadata JSON
    FaustAssignment   => Version(=4) [Topic [Partition]] UserData
                                                         UserData: zlib(ClientMetadata JSON)

``ClientMetadata`` JSON, as faust writes it with the standard library's ``json`` (compact
separators, non-ASCII characters as ``\\uXXXX`` escapes, keys in this order; faust with the
optional ``orjson`` writes raw UTF-8 instead, which decodes the same)::

    {"assignment":{"actives":{topic:[partition,...]},"standbys":{...}},
     "url":"http://host:port/","changelog_distribution":{url:{topic:[partition,...]}},
     "external_topic_distribution":{url:{topic:[...]}},"topic_groups":{topic:group}}

Decoders follow faust: the last two keys are optional. Inflating a faust assignment stops at
:data:`MAX_INFLATED_SIZE` bytes, so a small buffer cannot expand into a huge allocation.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol._buf import INT16_MAX, INT32_MAX, INT32_MIN, Reader, Writer
from topology.ids import TopicPartition

__all__ = [
    "FAUST_ASSIGNOR_VERSION",
    "FAUST_PROTOCOL_NAME",
    "MAX_INFLATED_SIZE",
    "FaustAssignment",
    "FaustClientMetadata",
    "FaustMemberView",
    "FaustSubscription",
    "HostDistribution",
    "decode_faust_assignment",
    "decode_faust_assignment_user_data",
    "decode_faust_client_metadata",
    "decode_faust_member_view",
    "decode_faust_subscription",
    "encode_faust_assignment",
    "encode_faust_client_metadata",
    "encode_faust_member_assignment",
    "encode_faust_subscription",
    "faust_client_metadata",
    "faust_kafka_assignment",
]

FAUST_PROTOCOL_NAME = "faust"
#: ``faust.assignor.PartitionAssignor.version``, written as the consumer protocol version.
FAUST_ASSIGNOR_VERSION = 4
#: Upper bound on an inflated faust assignment's ClientMetadata.
MAX_INFLATED_SIZE = 64 * 1024 * 1024

TopicPartitions = Mapping[str, tuple[int, ...]]
HostToPartitions = Mapping[str, TopicPartitions]


def _freeze_tp(value: Mapping[str, Iterable[int]]) -> TopicPartitions:
    return MappingProxyType({str(t): tuple(ps) for t, ps in value.items()})


_EMPTY_TP: TopicPartitions = MappingProxyType({})


def _compact_json(value: object) -> str:
    # faust's own ``json.dumps`` path (no orjson): compact separators, non-ASCII escaped.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True, sort_keys=True)


class HostDistribution(Mapping[str, TopicPartitions]):
    """An immutable host → topic → partitions map: faust's ``changelog_distribution`` and
    ``external_topic_distribution``. A faust leader sends the same two maps, with one entry per
    host, to every member; built once and shared by every member's metadata, the map is frozen
    once and its JSON written once (:meth:`json_text`) instead of once per member."""

    __slots__ = ("_hosts", "_json")

    def __init__(self, hosts: Mapping[str, Mapping[str, Iterable[int]]] | None = None) -> None:
        self._hosts: Mapping[str, TopicPartitions] = MappingProxyType(
            {str(h): _freeze_tp(tps) for h, tps in (hosts or {}).items()}
        )
        self._json: str | None = None

    @classmethod
    def of(cls, value: Mapping[str, Mapping[str, Iterable[int]]]) -> HostDistribution:
        """``value`` itself when it already is one, else a frozen copy."""
        return value if isinstance(value, HostDistribution) else cls(value)

    @classmethod
    def _frozen(cls, hosts: dict[str, TopicPartitions]) -> HostDistribution:
        # For the decoder, which builds each host's map frozen already.
        self = cls.__new__(cls)
        self._hosts = MappingProxyType(hosts)
        self._json = None
        return self

    def __getitem__(self, host: str) -> TopicPartitions:
        return self._hosts[host]

    def __iter__(self) -> Iterator[str]:
        return iter(self._hosts)

    def __len__(self) -> int:
        return len(self._hosts)

    def __repr__(self) -> str:
        return f"HostDistribution({dict(self._hosts)!r})"

    def json_text(self) -> str:
        """The map as faust writes it (keys sorted at both levels), computed once."""
        if self._json is None:
            self._json = _compact_json({h: dict(tps) for h, tps in self._hosts.items()})
        return self._json


@dataclass(frozen=True, slots=True, kw_only=True)
class FaustClientMetadata:
    """faust's ``ClientMetadata`` (with its ``ClientAssignment`` flattened into two fields)."""

    url: str
    actives: TopicPartitions = field(default_factory=dict)
    standbys: TopicPartitions = field(default_factory=dict)
    changelog_distribution: HostToPartitions = field(default_factory=HostDistribution)
    external_topic_distribution: HostToPartitions = field(default_factory=HostDistribution)
    topic_groups: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "actives", _freeze_tp(self.actives))
        object.__setattr__(self, "standbys", _freeze_tp(self.standbys))
        object.__setattr__(self, "changelog_distribution", HostDistribution.of(self.changelog_distribution))
        object.__setattr__(
            self, "external_topic_distribution", HostDistribution.of(self.external_topic_distribution)
        )
        object.__setattr__(self, "topic_groups", MappingProxyType(dict(self.topic_groups)))


def _tp_json(value: TopicPartitions) -> str:
    return _compact_json({t: list(ps) for t, ps in value.items()})


def encode_faust_client_metadata(meta: FaustClientMetadata) -> bytes:
    """The JSON faust's ``ClientMetadata.dumps()`` writes (mapping keys sorted). The two host
    distributions, the same for every member of an assignment, are written once each
    (:meth:`HostDistribution.json_text`) and joined with each member's own fields."""
    changelog = HostDistribution.of(meta.changelog_distribution)
    external = HostDistribution.of(meta.external_topic_distribution)
    return "".join(
        (
            '{"assignment":{"actives":',
            _tp_json(meta.actives),
            ',"standbys":',
            _tp_json(meta.standbys),
            '},"url":',
            _compact_json(meta.url),
            ',"changelog_distribution":',
            changelog.json_text(),
            ',"external_topic_distribution":',
            external.json_text(),
            ',"topic_groups":',
            _compact_json(dict(meta.topic_groups)),
            "}",
        )
    ).encode("ascii")


def faust_client_metadata(
    *,
    url: str,
    actives: Mapping[str, Iterable[int]] | None = None,
    standbys: Mapping[str, Iterable[int]] | None = None,
    changelog_distribution: Mapping[str, Mapping[str, Iterable[int]]] | None = None,
    external_topic_distribution: Mapping[str, Mapping[str, Iterable[int]]] | None = None,
    topic_groups: Mapping[str, int] | None = None,
) -> bytes:
    """Build and encode a faust ``ClientMetadata`` in one call."""
    return encode_faust_client_metadata(
        FaustClientMetadata(
            url=url,
            actives=_freeze_tp(actives or {}),
            standbys=_freeze_tp(standbys or {}),
            changelog_distribution=HostDistribution(changelog_distribution),
            external_topic_distribution=HostDistribution(external_topic_distribution),
            topic_groups=dict(topic_groups or {}),
        )
    )


def _expect(value: Any, kind: type, where: str) -> Any:
    # bool is an int in Python but not in faust's JSON.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise DecodeError(f"faust ClientMetadata: {where} must be {kind.__name__}, got {value!r:.80}")
    return value


def _int32(value: Any, where: str) -> int:
    number: int = _expect(value, int, where)
    if not INT32_MIN <= number <= INT32_MAX:
        raise DecodeError(f"faust ClientMetadata: {where} = {number} does not fit in an int32")
    return number


def _int32s(parts: Any) -> bool:
    """Is ``parts`` a JSON list of int32s (the common case, checked without a loop in Python)?"""
    if type(parts) is not list:
        return False
    if not parts:
        return True
    if set(map(type, parts)) != {int}:
        return False
    low: int = min(parts)
    high: int = max(parts)
    return low >= INT32_MIN and high <= INT32_MAX


def _tp_from(value: Any, where: str) -> TopicPartitions:
    topics = _expect(value, dict, where)
    if not topics:
        return _EMPTY_TP
    out: dict[str, tuple[int, ...]] = {}
    for topic, parts in topics.items():
        if not _int32s(parts):  # say exactly what is wrong
            for p in _expect(parts, list, f"{where}[{topic}]"):
                _int32(p, f"{where}[{topic}]")
        out[topic] = tuple(parts)
    return MappingProxyType(out)


def _hosts_from(value: Any, where: str) -> HostDistribution:
    hosts = _expect(value, dict, where)
    out: dict[str, TopicPartitions] = {}
    for host, topics in hosts.items():
        # Most hosts of a large group hold no changelog partition: no per-host string then.
        out[host] = _EMPTY_TP if type(topics) is dict and not topics else _tp_from(topics, f"{where}[{host}]")
    return HostDistribution._frozen(out)


def _or_empty(value: Any) -> Any:
    return {} if value is None else value


def _document(data: bytes) -> dict[str, Any]:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise DecodeError(f"faust ClientMetadata: expected bytes, got {type(data).__name__}")
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DecodeError(f"faust ClientMetadata is not JSON: {str(exc)[:200]}") from None
    checked: dict[str, Any] = _expect(doc, dict, "the document")
    return checked


def decode_faust_client_metadata(data: bytes) -> FaustClientMetadata:
    """Parse faust's ``ClientMetadata`` JSON; anything else is a :class:`DecodeError`."""
    doc = _document(data)
    assignment = _expect(doc.get("assignment"), dict, "assignment")
    # faust defaults both of these when they are missing or null.
    groups = _expect(_or_empty(doc.get("topic_groups")), dict, "topic_groups")
    return FaustClientMetadata(
        url=_expect(doc.get("url"), str, "url"),
        actives=_tp_from(assignment.get("actives"), "assignment.actives"),
        standbys=_tp_from(assignment.get("standbys"), "assignment.standbys"),
        changelog_distribution=_hosts_from(doc.get("changelog_distribution"), "changelog_distribution"),
        external_topic_distribution=_hosts_from(
            _or_empty(doc.get("external_topic_distribution")), "external_topic_distribution"
        ),
        topic_groups={t: _int32(g, f"topic_groups[{t}]") for t, g in groups.items()},
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FaustMemberView:
    """What a member acts on in the ClientMetadata of its own faust assignment: its url, its
    actives and its standbys."""

    url: str
    actives: TopicPartitions
    standbys: TopicPartitions


_MEMBER_FIELDS = frozenset({"assignment", "url"})
_DECODER = json.JSONDecoder()
_SPACE = frozenset(" \t\n\r")


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _leading_fields(text: str, wanted: frozenset[str]) -> dict[str, Any] | None:
    """The top-level fields of the JSON object ``text`` read in order until every ``wanted``
    one has been read; the rest of the text is not read. None when the text does not start as
    a JSON object or its fields up to there do not parse (the caller then parses it all, which
    says what is wrong)."""
    try:
        at = _skip_space(text, 0)
        if text[at] != "{":
            return None
        at += 1
        fields: dict[str, Any] = {}
        while True:
            at = _skip_space(text, at)
            if text[at] == "}":
                return fields
            if text[at] != '"':
                return None
            key, at = _DECODER.raw_decode(text, at)
            at = _skip_space(text, at)
            if text[at] != ":":
                return None
            fields[key], at = _DECODER.raw_decode(text, _skip_space(text, at + 1))
            if wanted <= fields.keys():
                return fields
            at = _skip_space(text, at)
            if text[at] == "}":
                return fields
            if text[at] != ",":
                return None
            at += 1
    except (ValueError, IndexError, RecursionError):
        return None


def decode_faust_member_view(data: bytes) -> FaustMemberView:
    """Read a faust assignment's user data (zlib-compressed ClientMetadata JSON) as the member
    it was sent to: url, actives and standbys, checked as
    :func:`decode_faust_assignment_user_data` checks them. The JSON is read from its start up
    to the last of those fields, and no further: the two host distributions after them (every
    host's partitions, which faust's web views route requests by and streamtasks does not use)
    are not read, because reading them costs time in proportion to the group's size at every
    member in every rebalance (faust writes ``assignment`` and ``url`` first; in a document
    written in another order, everything up to the later of the two is read; a field repeated
    after that point is not seen)."""
    inflated = _inflate(data)
    try:
        fields = _leading_fields(inflated.decode("utf-8"), _MEMBER_FIELDS)
    except UnicodeDecodeError:
        fields = None
    doc = fields if fields is not None and fields.keys() >= _MEMBER_FIELDS else _document(inflated)
    assignment = _expect(doc.get("assignment"), dict, "assignment")
    return FaustMemberView(
        url=_expect(doc.get("url"), str, "url"),
        actives=_tp_from(assignment.get("actives"), "assignment.actives"),
        standbys=_tp_from(assignment.get("standbys"), "assignment.standbys"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FaustSubscription:
    topics: tuple[str, ...]
    metadata: FaustClientMetadata
    version: int = FAUST_ASSIGNOR_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class FaustAssignment:
    partitions: tuple[TopicPartition, ...]
    metadata: FaustClientMetadata
    version: int = FAUST_ASSIGNOR_VERSION


def encode_faust_subscription(sub: FaustSubscription) -> bytes:
    """aiokafka's ``ConsumerProtocolMemberMetadata`` as a faust member sends it (topics sorted)."""
    w = Writer()
    w.int16(sub.version, "version")
    w.kafka_array_length(len(sub.topics), "topics")
    for topic in sorted(sub.topics):
        w.kafka_nullable_string(topic, "topic")
    w.kafka_nullable_bytes(encode_faust_client_metadata(sub.metadata), "user_data")
    return w.getvalue()


def decode_faust_subscription(data: bytes) -> FaustSubscription:
    """Read a faust member's JoinGroup metadata (v0 layout whatever the header says)."""
    r = Reader(data, "faust subscription")
    version = r.int16()
    if version < 0:
        raise r.fail(f"unsupported version {version}")
    topics = tuple(r.kafka_string("topic") for _ in range(r.kafka_array_length("topics", 2)))
    user_data = r.kafka_nullable_bytes("user_data")
    if user_data is None:
        raise r.fail("user_data (faust ClientMetadata) is null")
    return FaustSubscription(topics=topics, metadata=decode_faust_client_metadata(user_data), version=version)


def encode_faust_assignment(a: FaustAssignment) -> bytes:
    """The assignment faust's leader sends: partitions grouped by sorted topic, compressed JSON."""
    if not 0 <= a.version <= INT16_MAX:
        raise LocalProtocolError(f"faust assignment version {a.version} is not an int16 >= 0")
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(a.partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    w = Writer()
    w.int16(a.version, "version")
    w.kafka_array_length(len(by_topic), "assignment")
    for topic, parts in by_topic.items():
        w.kafka_nullable_string(topic, "topic")
        w.kafka_array_length(len(parts), "partitions")
        for p in parts:
            w.int32(p, "partition")
    w.kafka_nullable_bytes(zlib.compress(encode_faust_client_metadata(a.metadata)), "user_data")
    return w.getvalue()


def faust_kafka_assignment(
    meta: FaustClientMetadata, changelog_topics: frozenset[str]
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The partitions a faust member must be given for ``meta`` (faust's
    ``ClientAssignment.kafka_protocol_assignment``): every topic of its actives, each followed
    by its standbys when the topic is a changelog, and changelog topics only in the standbys;
    topics sorted, empty topics kept. A faust member checks its assignment against exactly this
    list (order included), so a leader must send it as it is."""
    out: dict[str, list[int]] = {t: list(ps) for t, ps in meta.actives.items()}
    for topic, parts in meta.standbys.items():
        if topic in changelog_topics:
            out.setdefault(topic, []).extend(parts)
    return tuple((t, tuple(out[t])) for t in sorted(out))


def encode_faust_member_assignment(
    meta: FaustClientMetadata,
    changelog_topics: frozenset[str],
    version: int = FAUST_ASSIGNOR_VERSION,
) -> bytes:
    """A faust leader's SyncGroup assignment for one member: :func:`faust_kafka_assignment`
    in aiokafka's ``ConsumerProtocolMemberAssignment`` layout, and ``meta`` compressed."""
    if not 0 <= version <= INT16_MAX:
        raise LocalProtocolError(f"faust assignment version {version} is not an int16 >= 0")
    groups = faust_kafka_assignment(meta, changelog_topics)
    w = Writer()
    w.int16(version, "version")
    w.kafka_array_length(len(groups), "assignment")
    for topic, parts in groups:
        w.kafka_nullable_string(topic, "topic")
        w.kafka_array_length(len(parts), "partitions")
        for p in parts:
            w.int32(p, "partition")
    w.kafka_nullable_bytes(zlib.compress(encode_faust_client_metadata(meta)), "user_data")
    return w.getvalue()


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, MAX_INFLATED_SIZE)
    except zlib.error as exc:
        raise DecodeError(f"faust assignment user_data is not zlib data: {exc}") from None
    if inflater.unconsumed_tail:
        raise DecodeError(f"faust assignment user_data inflates beyond {MAX_INFLATED_SIZE} bytes")
    if not inflater.eof:
        raise DecodeError("faust assignment user_data is a truncated zlib stream")
    return out


def decode_faust_assignment_user_data(data: bytes) -> FaustClientMetadata:
    """The ClientMetadata in a faust assignment's user data (zlib-compressed JSON)."""
    return decode_faust_client_metadata(_inflate(data))


def decode_faust_assignment(data: bytes) -> FaustAssignment:
    r = Reader(data, "faust assignment")
    version = r.int16()
    if version < 0:
        raise r.fail(f"unsupported version {version}")
    partitions: list[TopicPartition] = []
    for _ in range(r.kafka_array_length("assignment", 6)):
        topic = r.kafka_string("topic")
        for _ in range(r.kafka_array_length("partitions", 4)):
            partitions.append(TopicPartition(topic, r.int32()))
    user_data = r.kafka_nullable_bytes("user_data")
    if user_data is None:
        raise r.fail("user_data (compressed faust ClientMetadata) is null")
    return FaustAssignment(
        partitions=tuple(partitions),
        metadata=decode_faust_client_metadata(_inflate(user_data)),
        version=version,
    )
