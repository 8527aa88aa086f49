"""Properties of the streams assignor over random groups, through the real leader step.

The topology: wordcount (0: ``text`` → repartition, 1: repartition → ``counts``) plus a
co-partitioned join (2: ``clicks`` + ``views`` → ``joined``), so a task may have two source
partitions.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from assignors.cooperative import OwnedClaim, valid_claims
from streamtasks.protocol.classic_group import JoinGroupMember
from streamtasks.protocol.consumer_protocol import decode_subscription
from streamtasks.protocol.userdata import RUNNING_OFFSET_SUM, UNKNOWN_OFFSET_SUM, AssignorErrorCode
from tests.streams.helpers import REPARTITION, assignor, member, pid, run
from topology import TaskId, TopicPartition, Topology, TopologyBuilder


def _topology() -> Topology:
    builder = TopologyBuilder("wc")
    builder.stream("text").repartition("words").store("counts")
    builder.stream("clicks", "views").store("joined")
    return builder.build()


TOPOLOGY = _topology()
COUNTS = {"text": 3, REPARTITION: 3, "clicks": 2, "views": 2}
SOURCES = {t.id: t.source_partitions for t in TOPOLOGY.tasks(COUNTS)}
PARTITIONS = sorted(tp for parts in SOURCES.values() for tp in parts)
TASK_OF = {tp: task for task, parts in SOURCES.items() for tp in parts}
TASK_NAMES = [str(t) for t in sorted(SOURCES)] + ["5_0"]  # 5_0: not in the topology

offset_sums = st.dictionaries(
    st.sampled_from(TASK_NAMES),
    st.sampled_from([RUNNING_OFFSET_SUM, UNKNOWN_OFFSET_SUM, 0, 500, 990, 5_000]),
    max_size=5,
)


@st.composite
def groups(draw: st.DrawFn) -> list[JoinGroupMember]:
    a = assignor(topology=TOPOLOGY)
    members = []
    for i in range(draw(st.integers(1, 6))):
        process = pid(draw(st.integers(1, 3)))
        garbage = draw(st.integers(0, 9)) == 0
        members.append(
            member(
                f"m{i}",
                process,
                of=a,
                sums=draw(offset_sums),
                owned=draw(st.lists(st.sampled_from(PARTITIONS), max_size=6, unique=True)),
                generation=draw(st.integers(-1, 3)),
                endpoint=draw(st.sampled_from([None, "h1:1", f"h{process.int}:2"])),
                version=draw(st.sampled_from([None, None, 1, 2])),
                user_data=draw(st.binary(max_size=12)) if garbage else None,
            )
        )
    return members


def _valid_owner(members: list[JoinGroupMember]) -> dict[TopicPartition, str]:
    claims = {}
    for m in members:
        sub = decode_subscription(m.metadata)
        claims[m.member_id] = OwnedClaim(partitions=sub.owned_partitions, generation=sub.generation_id)
    return {tp: m for m, tps in valid_claims(claims).items() for tp in tps}


def _partitions(tasks: frozenset[TaskId]) -> tuple[TopicPartition, ...]:
    return tuple(sorted(tp for t in tasks for tp in SOURCES[t]))


@given(groups(), st.sampled_from([0, 1]))
def test_every_partition_once_never_to_a_member_while_another_owns_it(
    members: list[JoinGroupMember], standbys: int
) -> None:
    a = assignor(topology=TOPOLOGY, standbys=standbys)
    answer = run(members, a, COUNTS)
    assert set(answer.infos) == {m.member_id for m in members}  # every member's AssignmentInfo decodes
    claimed = {tp for m in members for tp in decode_subscription(m.metadata).owned_partitions}
    owner = _valid_owner(members)
    given_to: dict[TopicPartition, str] = {}
    for m, parts in answer.partitions.items():
        info = answer.infos[m]
        assert parts == _partitions(info.active_tasks)
        assert not (info.active_tasks & (info.standby_tasks | info.warmup_tasks))
        for tp in parts:
            assert tp not in given_to, f"{tp} given to {given_to[tp]} and {m}"
            given_to[tp] = m
            assert owner.get(tp, m) == m, f"{tp} given to {m} while {owner[tp]} owns it"
    readable = any(info.error_code is AssignorErrorCode.NONE for info in answer.infos.values())
    assert readable or not given_to  # nobody could be read: nobody gets anything
    for tp in PARTITIONS:
        if readable and tp not in given_to:  # withheld: its task's partitions are still claimed
            assert set(SOURCES[TASK_OF[tp]]) & claimed
            assert answer.result.followup_needed
    assert run(list(reversed(members)), a, COUNTS).raw == answer.raw  # deterministic
