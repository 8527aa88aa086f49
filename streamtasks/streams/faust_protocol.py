"""The ``"faust"`` protocol spoken by streamtasks members while faust members remain
(``upgrade_from="faust"``), pure.

:class:`FaustProtocolAssignor` is a
:class:`~streamtasks.membership.classic.foreign.ForeignProtocolAssignor`:

* **join**: it offers faust's subscription (version 4, aiokafka's v0 layout) with faust's
  ``ClientMetadata``: this member's url and the faust assignment it holds (the last one it was
  given, or nothing after it lost its partitions), so faust's stickiness sees it as any member;
* **lead**: it runs faust's assignment (:func:`~streamtasks.streams.faust_assignment.faust_assign`)
  over every member, faust or streamtasks, and answers each one as faust's leader would: the
  partitions in faust's own order (actives, then standbys of changelog topics), the compressed
  ``ClientMetadata`` with the member's url echoed, the changelog and external topic
  distributions and the topic groups
  (:func:`~streamtasks.protocol.faust_compat.encode_faust_member_assignment`);
* **member**: :meth:`FaustProtocolAssignor.read_assignment` reads a faust assignment (from
  whichever leader) into the streamtasks ``AssignmentInfo`` the app runs: standby tasks from the
  standby partitions of its source topics; active tasks come from the owned source partitions
  as always. Changelog and leader-topic partitions in a faust assignment belong to no task.
  It reads only this member's own fields
  (:func:`~streamtasks.protocol.faust_compat.decode_faust_member_view`), not the every-host
  distributions, whose size grows with the group.

faust is eager-only, so is this protocol. The group leaves it at the second bounce, when
members stop offering ``"faust"`` and the coordinator selects ``"streamtasks"``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import ClassVar

from assignors.partition.hooks import MemberAssignment
from assignors.partition.types import GroupAssignment, GroupSubscription, MemberId, RebalanceProtocol
from streamtasks.errors import AssignorError, DecodeError, TopologyError
from streamtasks.membership.classic.leader_result import LeaderResult
from streamtasks.protocol.classic_group import JoinGroupMember, SyncGroupAssignment
from streamtasks.protocol.faust_compat import (
    FAUST_ASSIGNOR_VERSION,
    FAUST_PROTOCOL_NAME,
    FaustClientMetadata,
    FaustSubscription,
    HostDistribution,
    decode_faust_member_view,
    decode_faust_subscription,
    encode_faust_member_assignment,
    encode_faust_subscription,
    faust_kafka_assignment,
)
from streamtasks.protocol.userdata import AssignmentInfo
from streamtasks.streams.assignor import AssignmentRead
from streamtasks.streams.faust_assignment import FaustMemberInput, faust_assign
from topology.ids import TaskId, TopicPartition
from topology.model import Topology

__all__ = ["FaustProtocolAssignor", "faust_leader_topic", "faust_topics"]

log = logging.getLogger("streamtasks.streams.faust_protocol")


def faust_leader_topic(application_id: str) -> str:
    """The one-partition topic every faust member subscribes to (faust's ``LeaderAssignor``)."""
    return f"{application_id}-__assignor-__leader"


def faust_topics(topology: Topology) -> tuple[str, ...]:
    """What a faust app built like ``topology`` subscribes to: its sources, repartition topics,
    table changelogs and faust's leader topic (sorted). A streamtasks member must offer the same
    topics, or faust's leader would split them into different co-partitioned sets."""
    changelogs = {
        store.changelog_topic(topology.application_id)
        for sub in topology.subtopologies
        for store in sub.stores
        if store.logging
    }
    return tuple(
        sorted({*topology.subscribed_topics(), *changelogs, faust_leader_topic(topology.application_id)})
    )


class FaustProtocolAssignor:
    """See the module docstring. ``replicas``: faust's ``table_standby_replicas``; ``url``:
    this member's url in faust's metadata (any unique string; faust members only echo it)."""

    name: ClassVar[str] = FAUST_PROTOCOL_NAME
    version: ClassVar[int] = FAUST_ASSIGNOR_VERSION

    def __init__(self, topology: Topology, *, url: str, replicas: int) -> None:
        if replicas < 0:
            raise AssignorError(f"replicas must be >= 0, got {replicas}")
        self._topology = topology
        self._url = url
        self._replicas = replicas
        self._changelogs = frozenset(
            store.changelog_topic(topology.application_id)
            for sub in topology.subtopologies
            for store in sub.stores
            if store.logging
        )
        #: The faust assignment this member holds (what it reports when it joins).
        self._held = FaustClientMetadata(url=url)
        self.last_problems: tuple[str, ...] = ()

    @property
    def changelog_topics(self) -> frozenset[str]:
        return self._changelogs

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER,)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        raise AssignorError("the faust protocol has its own wire format: its leader runs lead_foreign()")

    # -- member ------------------------------------------------------------------------------

    def join_metadata(self, topics: tuple[str, ...], previous: tuple[TopicPartition, ...]) -> bytes:
        held = self._held if previous else FaustClientMetadata(url=self._url)
        return encode_faust_subscription(FaustSubscription(topics=topics, metadata=held))

    def read_assignment(self, user_data: bytes) -> AssignmentInfo:
        """Read a faust assignment's user data (remembered for the next join) into the tasks
        this member runs; raises :class:`DecodeError` on bytes that are not faust's. (Not the
        partition-assignor hook ``on_assignment``, which takes a ``MemberAssignment``: a name
        of its own, so the hook's runtime check does not mistake this class for a listener.)"""
        meta = decode_faust_member_view(user_data)
        self._held = FaustClientMetadata(url=self._url, actives=meta.actives, standbys=meta.standbys)
        standby: set[TaskId] = set()
        for topic, parts in meta.standbys.items():
            for p in parts:
                try:
                    standby.add(self._topology.task_for(TopicPartition(topic, p)))
                except TopologyError:
                    continue  # a changelog or faust's leader topic: no task reads it
        return AssignmentInfo(standby_tasks=frozenset(standby))

    def read_member_assignment(self, assignment: MemberAssignment, *, follow_version: bool) -> AssignmentRead:
        """The :class:`~streamtasks.streams.assignment_reader.AssignmentReader` hook:
        :meth:`read_assignment` (faust's user data has no versions to follow). Bytes that are
        not faust's are an :attr:`AssignmentRead.error` (logged) and no tasks beyond the owned
        partitions'."""
        if not assignment.user_data:
            return AssignmentRead(info=AssignmentInfo(), sent_version=self.version, versioned=False)
        try:
            info = self.read_assignment(assignment.user_data)
        except DecodeError as exc:
            log.error("faust assignment userdata is malformed, running only the owned tasks: %s", exc)
            error = DecodeError(f"unreadable faust assignment: {exc}")
            return AssignmentRead(
                info=AssignmentInfo(), sent_version=self.version, error=error, versioned=False
            )
        return AssignmentRead(info=info, sent_version=self.version, versioned=False)

    # -- leader ------------------------------------------------------------------------------

    def lead_foreign(
        self, members: tuple[JoinGroupMember, ...], partitions_per_topic: Mapping[str, int]
    ) -> LeaderResult:
        problems: list[str] = []
        subs: dict[MemberId, FaustSubscription] = {}
        for member in sorted(members, key=lambda m: m.member_id):
            try:
                subs[member.member_id] = decode_faust_subscription(member.metadata)
            except DecodeError as exc:
                problems.append(f"member {member.member_id!r}: undecodable faust subscription: {exc}")
        topics = tuple(sorted({t for s in subs.values() for t in s.topics}))
        missing = [t for t in topics if partitions_per_topic.get(t, 0) <= 0]
        if missing:
            problems.append(f"no partition count for topics {missing}; left out of this assignment")
        inputs = {
            m: FaustMemberInput(topics=s.topics, actives=s.metadata.actives, standbys=s.metadata.standbys)
            for m, s in subs.items()
        }
        try:
            outs, topic_groups = faust_assign(inputs, partitions_per_topic, replicas=self._replicas)
        except AssignorError as exc:
            problems.append(f"faust assignment failed, every member gets nothing: {exc}")
            outs, topic_groups = {}, {}
        url = {m: s.metadata.url for m, s in subs.items()}
        # Frozen (and written as JSON) once, shared by every member's metadata.
        changelog_distribution = HostDistribution(
            {url[m]: {t: ps for t, ps in o.actives.items() if t in self._changelogs} for m, o in outs.items()}
        )
        external = HostDistribution(
            {
                url[m]: {t: ps for t, ps in o.actives.items() if t not in self._changelogs}
                for m, o in outs.items()
            }
        )
        no_hosts = HostDistribution()
        encoded: list[SyncGroupAssignment] = []
        assignment: dict[MemberId, tuple[TopicPartition, ...]] = {}
        for member_id in sorted({m.member_id for m in members}):
            out = outs.get(member_id)
            meta = FaustClientMetadata(
                url=url.get(member_id, ""),
                actives=out.actives if out else {},
                standbys=out.standbys if out else {},
                changelog_distribution=changelog_distribution if out else no_hosts,
                external_topic_distribution=external if out else no_hosts,
                topic_groups=topic_groups if out else {},
            )
            encoded.append(
                SyncGroupAssignment(
                    member_id=member_id, assignment=encode_faust_member_assignment(meta, self._changelogs)
                )
            )
            assignment[member_id] = tuple(
                sorted(
                    TopicPartition(t, p)
                    for t, ps in faust_kafka_assignment(meta, self._changelogs)
                    for p in ps
                )
            )
        self.last_problems = tuple(problems)
        return LeaderResult(
            assignments=tuple(encoded),
            assignment=assignment,
            group_topics=topics,
            followup_needed=False,
            problems=tuple(problems),
        )
