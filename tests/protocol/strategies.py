"""Hypothesis strategies for every message the protocol package encodes."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from streamtasks.protocol import (
    LATEST_VERSION,
    RUNNING_OFFSET_SUM,
    UNKNOWN_OFFSET_SUM,
    AssignmentInfo,
    AssignorErrorCode,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    FaustClientMetadata,
    StickyUserData,
    SubscriptionInfo,
)
from topology.ids import TaskId, TopicPartition

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

#: Any text UTF-8 can carry (no lone surrogates).
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
topic_names = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=10)
partitions = st.integers(INT32_MIN, INT32_MAX)
small_partitions = st.integers(0, 40)
user_data = st.none() | st.binary(max_size=40)


def topic_partitions(part: st.SearchStrategy[int] = partitions) -> st.SearchStrategy[TopicPartition]:
    # A small topic alphabet, so that partitions of one topic appear together and apart.
    return st.builds(TopicPartition, st.sampled_from(["a", "b", "topic-ü", "z"]) | topic_names, part)


subscriptions = st.builds(
    ConsumerProtocolSubscription,
    topics=st.lists(topic_names, max_size=5).map(tuple),
    user_data=user_data,
    owned_partitions=st.lists(topic_partitions(), max_size=8, unique=True).map(tuple),
    generation_id=partitions,
    rack_id=st.none() | text,
    version=st.integers(0, 3),
)

assignments = st.builds(
    ConsumerProtocolAssignment,
    assigned_partitions=st.lists(topic_partitions(), max_size=8).map(tuple),
    user_data=user_data,
    version=st.integers(0, 3),
)

sticky_userdata = st.builds(
    StickyUserData,
    partitions=st.lists(topic_partitions(), max_size=8, unique=True).map(lambda ps: tuple(sorted(ps))),
    generation=st.none() | partitions,
)

task_ids = st.builds(
    TaskId,
    st.integers(0, 6) | st.integers(0, INT32_MAX),
    st.integers(0, 300) | st.integers(0, INT32_MAX),
)
task_sets = st.frozensets(task_ids, max_size=6)
offset_sums = st.sampled_from([RUNNING_OFFSET_SUM, UNKNOWN_OFFSET_SUM]) | st.integers(0, INT64_MAX)
uuids = st.builds(uuid.UUID, int=st.integers(0, (1 << 128) - 1))
hosts = st.text(st.characters(exclude_categories=["Cs"]), max_size=16)
error_codes = st.sampled_from(list(AssignorErrorCode))
versions = st.integers(1, LATEST_VERSION)

subscription_infos = st.builds(
    SubscriptionInfo,
    process_id=uuids,
    task_offset_sums=st.dictionaries(task_ids, offset_sums, max_size=12),
    endpoint=st.none() | hosts,
    capacity=st.integers(1, INT32_MAX),
    rack=st.none() | text,
    client_tags=st.dictionaries(text, text, max_size=3),
    topology_fingerprint=st.none() | st.binary(min_size=16, max_size=16),
    error_code=error_codes,
    version=versions,
    latest_supported_version=st.just(LATEST_VERSION),
)


@st.composite
def assignment_infos(draw: st.DrawFn) -> AssignmentInfo:
    tasks = draw(st.lists(task_ids, unique=True, max_size=12))
    cut1 = draw(st.integers(0, len(tasks)))
    cut2 = draw(st.integers(cut1, len(tasks)))
    optional_ms = st.none() | st.integers(0, INT64_MAX - 1)
    return AssignmentInfo(
        active_tasks=frozenset(tasks[:cut1]),
        standby_tasks=frozenset(tasks[cut1:cut2]),
        warmup_tasks=frozenset(tasks[cut2:]),
        active_tasks_by_host=draw(st.dictionaries(hosts, task_sets, max_size=2)),
        standby_tasks_by_host=draw(st.dictionaries(hosts, task_sets, max_size=2)),
        error_code=draw(error_codes),
        next_rebalance_ms=draw(optional_ms),
        acceptable_recovery_lag=draw(optional_ms),
        version=draw(versions),
        latest_supported_version=LATEST_VERSION,
    )


_tp_maps = st.dictionaries(topic_names, st.lists(small_partitions, max_size=4).map(tuple), max_size=2)

faust_metadata = st.builds(
    FaustClientMetadata,
    url=text,
    actives=_tp_maps,
    standbys=_tp_maps,
    changelog_distribution=st.dictionaries(text, _tp_maps, max_size=2),
    external_topic_distribution=st.dictionaries(text, _tp_maps, max_size=2),
    topic_groups=st.dictionaries(topic_names, st.integers(0, 9), max_size=3),
)


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    """``valid`` with a few random edits: flips, truncation, insertions, 0xff runs."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "ff", "zero"]))
        pos = draw(st.integers(0, len(data)))
        if op == "flip" and data:
            i = min(pos, len(data) - 1)
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=6))
        elif op == "ff":
            data[pos : pos + 4] = b"\xff\xff\xff\xff"
        elif op == "zero":
            data[pos : pos + 2] = b"\x00\x00"
    return bytes(data)
