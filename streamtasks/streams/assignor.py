"""The streams partition assignor: a KIP-924 task assignor behind the consumer group protocol.

:class:`StreamsPartitionAssignor` is what the group leader runs (``"streamtasks"`` in
JoinGroup). From the members' subscriptions (streamtasks ``SubscriptionInfo`` in the consumer
protocol's user data, plus the owned partitions of KIP-429) it builds one KIP-924
``ClientState`` per process, runs the configured task assignor, spreads each process's tasks
over its members (one member per stream thread), withholds what still has to be revoked
elsewhere (cooperative), and answers every member with its partitions and an encoded
``AssignmentInfo``. Bad input from peers never raises: the member concerned gets nothing and
the reason goes to :attr:`StreamsPartitionAssignor.last_problems`. The rules, with a worked
example, are in ``docs/streams.md``.

Pure: the changelog end offsets, the leader's clock and, for the member's own subscription,
its process id and task offset sums are injected as callables. The assignor owns its user data
both ways (:mod:`assignors.partition.hooks`): :meth:`StreamsPartitionAssignor.subscription_user_data`
writes a member's ``SubscriptionInfo``, :meth:`~StreamsPartitionAssignor.assign` reads them, and
:meth:`~StreamsPartitionAssignor.on_assignment` reads the ``AssignmentInfo`` a member got.

Version probing (KIP-268, ``docs/protocol.md``) runs on both sides. The leader answers at the
lowest version any member sent (:func:`~streamtasks.protocol.probing.negotiate`), treating a
member above its own latest as a newcomer. The member keeps the version it subscribes with:
:meth:`~StreamsPartitionAssignor.read_assignment` moves it down when the assignment came at an
older version than it sent, and up when the group's commonly supported version rose, and says
when the member must rejoin to send it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from assignors.partition.hooks import MemberAssignment
from assignors.partition.types import GroupAssignment, GroupSubscription, MemberId, RebalanceProtocol
from assignors.types import (
    ApplicationState,
    AssignmentConfigs,
    AssignmentError,
    ProcessAssignment,
    TaskAssignment,
    TaskAssignor,
    TaskSpec,
)
from assignors.validate import validate_task_assignment
from streamtasks.errors import (
    ConfigError,
    DecodeError,
    RemoteProtocolError,
    StreamTasksError,
    TopologyError,
)
from streamtasks.protocol.probing import MemberVersionUpdate, negotiate, on_assignment_version
from streamtasks.protocol.userdata import (
    LATEST_VERSION,
    MIN_SUPPORTED_VERSION,
    AssignmentInfo,
    AssignorErrorCode,
    SubscriptionInfo,
    decode_assignment_info,
    encode_assignment_info,
    encode_subscription_info,
)
from streamtasks.streams._clients import DecodedMembers, GroupView, build_view, decode_subscription_infos
from streamtasks.streams._members import MemberTasks, spread_over_members, withhold_moving
from streamtasks.streams._table import LastTaskTable
from topology.ids import TaskId, TopicPartition, partition_order
from topology.model import TaskInfo, Topology

__all__ = ["AssignmentRead", "StreamsPartitionAssignor"]

log = logging.getLogger("streamtasks.streams.assignor")


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignmentRead:
    """What a member made of its assignment (:meth:`StreamsPartitionAssignor.read_assignment`)."""

    #: The tasks it names (empty without user data or when the user data cannot be read).
    info: AssignmentInfo
    #: The version of the subscription this assignment answers (the member's last one).
    sent_version: int
    #: Version probing's verdict: the next subscription version and whether to rejoin for it
    #: (None: no user data, unreadable user data, a leader that broke the version rules, or
    #: versions not followed).
    version: MemberVersionUpdate | None = None
    #: Why the user data, or its versions, were not used (None: they were).
    error: StreamTasksError | None = None
    #: Whether ``info.version`` is a streamtasks userdata version (False: the protocol's user
    #: data has no such version, as faust's).
    versioned: bool = True

    @property
    def rejoin(self) -> bool:
        """The member must rejoin so the group sees its new subscription version."""
        return self.version is not None and self.version.enforce_rebalance


class StreamsPartitionAssignor:
    """The group leader's assignor for a streamtasks application (module docstring).

    ``end_offsets``: the latest known end offsets of the changelog partitions (the runtime
    refreshes them); ``now_ms``: the leader's clock. Both are called once per :meth:`assign`.
    ``partition_racks``: the input partitions' replica racks (KIP-925's rack-aware placement),
    used when the group's own metadata carries none.

    What this process writes in its subscription (:meth:`subscription_user_data`, called for
    every JoinGroup): ``process_id`` and ``task_offset_sums`` (called then), ``rack``,
    ``client_tags``, ``endpoint`` (the interactive-query ``host:port``) and, at first,
    ``metadata_version`` (``upgrade_from``'s; ``None``: the latest), which version probing moves
    later (:meth:`read_assignment`). ``latest_version``
    is the newest userdata version this process reads, writes and advertises, as leader and as
    member: this code's latest, or an emulated older release's (drills).
    """

    name: ClassVar[str] = "streamtasks"
    version: ClassVar[int] = LATEST_VERSION

    def __init__(
        self,
        topology: Topology,
        *,
        task_assignor: TaskAssignor,
        configs: AssignmentConfigs,
        end_offsets: Callable[[], Mapping[TopicPartition, int]],
        now_ms: Callable[[], int],
        process_id: Callable[[], uuid.UUID | None] | None = None,
        task_offset_sums: Callable[[], Mapping[TaskId, int]] | None = None,
        rack: str | None = None,
        client_tags: Mapping[str, str] | None = None,
        endpoint: str | None = None,
        metadata_version: int | None = None,
        latest_version: int = LATEST_VERSION,
        partition_racks: Callable[[], Mapping[TopicPartition, frozenset[str]]] | None = None,
    ) -> None:
        if not MIN_SUPPORTED_VERSION <= latest_version <= LATEST_VERSION:
            raise ConfigError(
                f"latest_version {latest_version} is not in [{MIN_SUPPORTED_VERSION}, {LATEST_VERSION}]"
            )
        used = latest_version if metadata_version is None else metadata_version
        if not MIN_SUPPORTED_VERSION <= used <= latest_version:
            raise ConfigError(
                f"metadata_version {used} is not in [{MIN_SUPPORTED_VERSION}, {latest_version}] "
                "(the latest version this process speaks)"
            )
        self._topology = topology
        self._process_id = process_id
        self._task_offset_sums = task_offset_sums
        self._rack = rack
        self._client_tags = dict(client_tags or {})
        self._endpoint = endpoint
        self._latest = latest_version
        #: The version this member's next subscription is encoded at (version probing moves it).
        self._used_version = used
        #: The version of the last subscription this member wrote (None: none yet).
        self._sent_version: int | None = None
        self._task_assignor = task_assignor
        self._configs = configs
        self._end_offsets = end_offsets
        self._partition_racks = partition_racks
        self._now_ms = now_ms
        self._fingerprint = topology.fingerprint()
        self._tables = LastTaskTable(topology)
        #: What went wrong in the last :meth:`assign` (bad peers, fallbacks), in order.
        self.last_problems: tuple[str, ...] = ()

    @property
    def topology(self) -> Topology:
        return self._topology

    @property
    def latest_version(self) -> int:
        """The newest userdata version this process reads, writes and advertises."""
        return self._latest

    @property
    def used_version(self) -> int:
        """The version this member's next subscription is encoded at."""
        return self._used_version

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def subscription_user_data(
        self,
        *,
        topics: tuple[str, ...] = (),
        previous: tuple[TopicPartition, ...] = (),
        generation: int | None = None,
        process_id: uuid.UUID | None = None,
        task_offset_sums: Mapping[TaskId, int] | None = None,
        endpoint: str | None = None,
        rack: str | None = None,
        client_tags: Mapping[str, str] | None = None,
        version: int | None = None,
    ) -> bytes:
        """A member's ``SubscriptionInfo`` bytes (with this topology's fingerprint), encoded at
        ``version`` (default: :attr:`used_version`, which is then remembered as the version the
        member sent); it always advertises :attr:`latest_version`.

        The member's hook (:mod:`assignors.partition.hooks`): ``topics``, ``previous`` and
        ``generation`` are not needed (owned partitions travel in the consumer protocol);
        everything else comes from what the assignor was constructed with. Values passed here
        win over those (for peers simulated without a process of their own)."""
        if process_id is None and self._process_id is not None:
            process_id = self._process_id()
        if process_id is None:
            raise ConfigError("the streams assignor needs this process's id to subscribe (process_id)")
        if task_offset_sums is None:
            task_offset_sums = self._task_offset_sums() if self._task_offset_sums is not None else {}
        at = self._used_version if version is None else version
        info = SubscriptionInfo(
            process_id=process_id,
            task_offset_sums=task_offset_sums,
            endpoint=self._endpoint if endpoint is None else endpoint,
            rack=self._rack if rack is None else rack,
            client_tags=self._client_tags if client_tags is None else client_tags,
            topology_fingerprint=self._fingerprint,
            version=at,
            latest_supported_version=max(at, self._latest),
        )
        data = encode_subscription_info(info)
        if version is None:
            self._sent_version = at
        return data

    def on_assignment(self, assignment: MemberAssignment) -> AssignmentInfo:
        """The tasks a member's assignment names (its ``AssignmentInfo``): empty without user
        data, and empty (logged) for user data that cannot be read, so that the member runs the
        tasks of its partitions alone (the partitions are the source of truth). Versions are not
        followed (:meth:`read_assignment` does)."""
        return self.read_assignment(assignment, follow_version=False).info

    def read_member_assignment(self, assignment: MemberAssignment, *, follow_version: bool) -> AssignmentRead:
        """The member's hook (:class:`~streamtasks.streams.assignment_reader.AssignmentReader`):
        :meth:`read_assignment`."""
        return self.read_assignment(assignment, follow_version=follow_version)

    def read_assignment(self, assignment: MemberAssignment, *, follow_version: bool = True) -> AssignmentRead:
        """The member side of an assignment: its tasks (as :meth:`on_assignment`) and, with
        ``follow_version``, version probing (:func:`~streamtasks.protocol.probing.on_assignment_version`)
        against the version this member sent: an assignment at a lower version (an older leader
        or member) moves :attr:`used_version` down to the group's commonly supported version; a
        commonly supported version above it (the old members are gone) moves it up. The result
        says whether the member must rejoin to send the new version.

        Never raises for what the leader sent: an assignment above :attr:`latest_version` is a
        :class:`DecodeError`, one above the version sent (or claiming a common version this
        member cannot speak) a :class:`RemoteProtocolError`; either is logged and returned in
        :attr:`AssignmentRead.error`, and the version stays as it was."""
        sent = self._used_version if self._sent_version is None else self._sent_version
        if not assignment.user_data:
            return AssignmentRead(info=AssignmentInfo(), sent_version=sent)
        try:
            info = decode_assignment_info(assignment.user_data, latest=self._latest)
        except DecodeError as exc:
            log.error("assignment userdata is malformed, running only the owned partitions' tasks: %s", exc)
            return AssignmentRead(info=AssignmentInfo(), sent_version=sent, error=exc)
        if not follow_version:
            return AssignmentRead(info=info, sent_version=sent)
        try:
            update = on_assignment_version(sent, info.version, info.latest_supported_version, self._latest)
        except RemoteProtocolError as exc:
            log.error(
                "the leader broke the version probing rules (subscription version stays %d): %s",
                self._used_version,
                exc,
            )
            return AssignmentRead(info=info, sent_version=sent, error=exc)
        if update.enforce_rebalance:
            log.info(
                "sent a version %d subscription, got a version %d assignment (group's latest common "
                "version %d): subscribing with version %d from the next rebalance",
                sent,
                info.version,
                info.latest_supported_version,
                update.new_used_version,
            )
        self._used_version = update.new_used_version
        return AssignmentRead(info=info, sent_version=sent, version=update)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        problems: list[str] = []
        result = self._assign(group, problems, withhold=True)
        self.last_problems = tuple(problems)
        return result

    def assign_target(self, group: GroupSubscription) -> GroupAssignment:
        """KIP-848 (client-side): the target itself, nothing withheld. The coordinator hands
        partitions over (revoke before assign), so the KIP-429 withholding step is skipped;
        ``owned_partitions`` still make the answer sticky."""
        problems: list[str] = []
        result = self._assign(group, problems, withhold=False)
        self.last_problems = tuple(problems)
        return result

    # ------------------------------------------------------------------ the steps

    def _assign(self, group: GroupSubscription, problems: list[str], *, withhold: bool) -> GroupAssignment:
        members = sorted(group.members)
        if not members:
            return GroupAssignment(members={})
        decoded = decode_subscription_infos(group, problems, latest=self._latest)
        out = _Output(decoded, problems, self._configs.acceptable_recovery_lag, my_latest=self._latest)
        if not decoded.infos:
            return out.everyone_empty(AssignorErrorCode.ASSIGNMENT_ERROR)
        shutdown = sorted(
            m for m, i in decoded.infos.items() if i.error_code is AssignorErrorCode.SHUTDOWN_REQUESTED
        )
        if shutdown:
            problems.append(f"members {shutdown} request the application's shutdown; everyone gets nothing")
            return out.everyone_empty(AssignorErrorCode.SHUTDOWN_REQUESTED)
        sources = {t: n for t, n in group.partitions_per_topic.items() if t in self._topology.source_topics}
        try:
            table = self._tables.get(sources)
        except TopologyError as exc:
            problems.append(f"cannot compute the tasks ({exc}); every member gets nothing")
            return out.everyone_empty(AssignorErrorCode.INCOMPLETE_SOURCE_TOPIC_METADATA)
        self._check_peers(decoded, group, sources, problems)
        view = build_view(group, decoded.infos, table, self._end_offsets(), problems)
        racks = group.partition_racks or (self._partition_racks() if self._partition_racks else {})
        assignment = self._run_task_assignor(table.specs, view, self._now_ms(), problems, racks)
        by_id = table.by_id
        planned = spread_over_members(view, assignment)
        final, withheld = withhold_moving(planned, view, by_id, members) if withhold else (planned, False)
        return out.assignment(final, by_id, view, assignment.followup_rebalance_ms, withheld)

    def _check_peers(
        self,
        decoded: DecodedMembers,
        group: GroupSubscription,
        sources: Mapping[str, int],
        problems: list[str],
    ) -> None:
        """Report (without acting on) other topologies and repartition topics of another size."""
        other = sorted(
            m
            for m, info in decoded.infos.items()
            if info.topology_fingerprint is not None and info.topology_fingerprint != self._fingerprint
        )
        if other:
            problems.append(f"members {other} run a topology with another fingerprint than the leader's")
        expected = self._topology.partition_counts(sources)
        for topic in sorted(expected):
            actual = group.partitions_per_topic.get(topic)
            if actual is not None and topic not in sources and actual != expected[topic]:
                problems.append(
                    f"internal topic {topic!r} has {actual} partitions; the topology needs {expected[topic]}"
                )

    def _run_task_assignor(
        self,
        specs: Sequence[TaskSpec],
        view: GroupView,
        now_ms: int,
        problems: list[str],
        partition_racks: Mapping[TopicPartition, frozenset[str]],
    ) -> TaskAssignment:
        """The task assignor's answer, or every process keeping its previous actives."""
        name = getattr(self._task_assignor, "name", type(self._task_assignor).__name__)
        try:
            state = ApplicationState.build(
                specs, view.clients, self._configs, now_ms=now_ms, partition_racks=partition_racks
            )
            result = self._task_assignor.assign(state)
            if not isinstance(result, TaskAssignment):
                verdict = f"returned {type(result).__name__}, not a TaskAssignment"
            else:
                error = validate_task_assignment(state, result)
                if error is AssignmentError.NONE:
                    return result
                verdict = f"returned an invalid assignment ({error.value})"
        except Exception as exc:  # a plug-in's failure must not stop the group
            verdict = f"failed: {type(exc).__name__}: {exc}"
        problems.append(f"task assignor {name!r} {verdict}; every process keeps its previous active tasks")
        return _keep_previous(view)


def _keep_previous(view: GroupView) -> TaskAssignment:
    """Fallback: each process keeps its previous active tasks (the lowest process id wins a
    task two processes claim); no standbys, no warm-ups."""
    taken: set[TaskId] = set()
    processes = []
    for client in view.clients:
        mine = client.previous_active - taken
        taken |= mine
        processes.append(ProcessAssignment(process_id=client.process_id, active=mine))
    return TaskAssignment(processes=tuple(processes))


class _Output:
    """Encodes the answer: one AssignmentInfo per member, at the negotiated version."""

    def __init__(
        self, decoded: DecodedMembers, problems: list[str], acceptable_recovery_lag: int, *, my_latest: int
    ) -> None:
        self._decoded = decoded
        self._lag = acceptable_recovery_lag
        self._members = sorted({*decoded.infos, *decoded.bad})
        self.used, self.common, self.probing = _negotiate(decoded, problems, my_latest)

    def _version(self, member: MemberId) -> int:
        if member in self._decoded.infos:
            return self.used
        header = self._decoded.versions.get(member)
        return MIN_SUPPORTED_VERSION if header is None else min(self.used, header[0])

    def _encode(
        self,
        member: MemberId,
        mine: MemberTasks | None = None,
        *,
        error_code: AssignorErrorCode = AssignorErrorCode.NONE,
        active_by_host: Mapping[str, set[TaskId]] | None = None,
        standby_by_host: Mapping[str, set[TaskId]] | None = None,
        next_rebalance_ms: int | None = None,
    ) -> bytes:
        version = self._version(member)
        tasks = mine or MemberTasks()
        info = AssignmentInfo(
            active_tasks=tasks.active,
            standby_tasks=tasks.standby,
            warmup_tasks=tasks.warmup,
            active_tasks_by_host={h: frozenset(ts) for h, ts in (active_by_host or {}).items()},
            standby_tasks_by_host={h: frozenset(ts) for h, ts in (standby_by_host or {}).items()},
            error_code=error_code,
            next_rebalance_ms=next_rebalance_ms,
            acceptable_recovery_lag=self._lag,
            version=version,
            latest_supported_version=max(version, self.common),
        )
        return encode_assignment_info(info)

    def everyone_empty(self, code: AssignorErrorCode) -> GroupAssignment:
        return GroupAssignment(
            members={m: () for m in self._members},
            followup_needed=self.probing,
            user_data={m: self._encode(m, error_code=code) for m in self._members},
        )

    def assignment(
        self,
        final: Mapping[MemberId, MemberTasks],
        tasks: Mapping[TaskId, TaskInfo],
        view: GroupView,
        next_rebalance_ms: int | None,
        withheld: bool,
    ) -> GroupAssignment:
        active_by_host: dict[str, set[TaskId]] = {}
        standby_by_host: dict[str, set[TaskId]] = {}
        for member, mine in final.items():
            endpoint = view.members[member].endpoint
            if endpoint is None:
                continue
            if mine.active:
                active_by_host.setdefault(endpoint, set()).update(mine.active)
            if mine.standby or mine.warmup:
                standby_by_host.setdefault(endpoint, set()).update(mine.standby | mine.warmup)
        deadline = next_rebalance_ms if next_rebalance_ms is not None and next_rebalance_ms >= 0 else None
        partitions: dict[MemberId, tuple[TopicPartition, ...]] = {}
        user_data: dict[MemberId, bytes] = {}
        for member in self._members:
            got = final.get(member)
            if got is None:  # undecodable
                partitions[member] = ()
                user_data[member] = self._encode(member, error_code=AssignorErrorCode.ASSIGNMENT_ERROR)
                continue
            partitions[member] = tuple(
                sorted((tp for t in got.active for tp in tasks[t].source_partitions), key=partition_order)
            )
            user_data[member] = self._encode(
                member,
                got,
                active_by_host=active_by_host,
                standby_by_host=standby_by_host,
                next_rebalance_ms=deadline,
            )
        return GroupAssignment(
            members=partitions, followup_needed=withheld or self.probing, user_data=user_data
        )


def _negotiate(decoded: DecodedMembers, problems: list[str], my_latest: int) -> tuple[int, int, bool]:
    """``(used_version, common_latest, follow-up needed)`` over every readable header."""
    if not decoded.versions:
        return my_latest, my_latest, False
    try:
        decision = negotiate(decoded.versions, my_latest)
    except StreamTasksError as exc:  # headers were checked on reading; defensive
        problems.append(f"version negotiation failed ({exc}); answering at version {MIN_SUPPORTED_VERSION}")
        return MIN_SUPPORTED_VERSION, MIN_SUPPORTED_VERSION, True
    if decision.future_members:
        problems.append(
            f"members {list(decision.future_members)} speak a userdata version above {my_latest}: "
            f"version probing, answering at version {decision.used_version}"
        )
    return decision.used_version, decision.common_latest, decision.followup_needed
