"""The seed KIP-848's client-side assignment writes: ConsumerGroupPrepareAssignment (the chosen
member gets the group as it is, each member's target included) and
ConsumerGroupInstallAssignment (the computed target, validated against what Prepare showed,
installed; when the group moved on meanwhile, installed anyway and asked for again at once)."""

from __future__ import annotations

from streamtasks.coordinator.group import ConsumerGroup
from streamtasks.coordinator.records import (
    PreparedAssignmentRecord,
    PreparedMemberSpec,
    TargetAssignmentMemberRecord,
)
from streamtasks.coordinator.result import Result
from streamtasks.coordinator.selection import client_assignor_entry, select_client_assignor
from streamtasks.coordinator.target import InvalidAssignment, target_records, validate_installed
from streamtasks.coordinator.types import EMPTY_PARTITIONS
from streamtasks.coordinator.update import GroupUpdate, WriteContext
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
    PreparedAssignor,
    PreparedMember,
    PreparedTopic,
)
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = ["INVALID_ASSIGNMENT", "install_assignment", "prepare_assignment"]

#: The seed's INVALID_ASSIGNMENT has no Kafka error code: it is answered as INVALID_REQUEST
#: with an error message that starts with "INVALID_ASSIGNMENT:".
INVALID_ASSIGNMENT = KafkaErrorCode.INVALID_REQUEST

Prepare = ConsumerGroupPrepareAssignmentResponse
Install = ConsumerGroupInstallAssignmentResponse


def _check(
    group: ConsumerGroup | None, group_id: str, member_id: str, member_epoch: int
) -> tuple[KafkaErrorCode, str] | None:
    """The seed's checks, in its order, shared by Prepare and Install."""
    if not group_id or not member_id or member_epoch < 0:
        return KafkaErrorCode.INVALID_REQUEST, "GroupId and MemberId must be non-empty and MemberEpoch >= 0."
    if group is None:
        return KafkaErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id!r} does not exist."
    current = group.current(member_id)
    if group.member(member_id) is None or current is None:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID, "Unknown member."
    if current.member_epoch != member_epoch:
        return (
            KafkaErrorCode.STALE_MEMBER_EPOCH,
            f"Member epoch is {current.member_epoch}, not {member_epoch}.",
        )
    request = group.client_request
    if request is None or request.member_id != member_id:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID, "This member was not asked to compute the assignment."
    return None


def prepare_assignment(
    group: ConsumerGroup | None, request: ConsumerGroupPrepareAssignmentRequest, ctx: WriteContext
) -> Result[Prepare]:
    u = GroupUpdate(group, request.group_id, ctx)
    failed = _check(group, request.group_id, request.member_id, request.member_epoch)
    if failed is not None:
        return u.result(Prepare(error=failed[0], error_message=failed[1]))
    assert group is not None
    members = group.members
    name = select_client_assignor(members.values())
    if name is None:  # the request record is dropped whenever this happens; kept for safety
        return u.result(
            Prepare(error=KafkaErrorCode.UNKNOWN_MEMBER_ID, error_message="No client-side assignor.")
        )
    topics = group.partition_metadata
    specs, described = [], []
    for member_id in sorted(members):
        member = members[member_id]
        entry = client_assignor_entry(member, name)
        assert entry is not None
        subscribed = frozenset(
            t.topic_id for n in member.subscribed_topic_names if (t := group.topic_by_name(n))
        )
        specs.append(
            PreparedMemberSpec(
                member_id=member_id,
                subscribed_topic_ids=subscribed,
                minimum_version=entry.minimum_version,
                maximum_version=entry.maximum_version,
            )
        )
        current = group.current(member_id)
        target = group.target(member_id)
        described.append(
            PreparedMember(
                member_id=member_id,
                member_epoch=0 if current is None else current.member_epoch,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                subscribed_topic_ids=tuple(sorted(subscribed)),
                assignor=PreparedAssignor(
                    reason=entry.reason,
                    minimum_version=entry.minimum_version,
                    maximum_version=entry.maximum_version,
                    metadata_version=entry.metadata_version,
                    metadata_bytes=entry.metadata_bytes,
                ),
                topic_partitions=(EMPTY_PARTITIONS if target is None else target.partitions).to_wire(),
            )
        )
    u.emit(
        PreparedAssignmentRecord(
            group_id=group.group_id,
            member_id=request.member_id,
            group_epoch=group.group_epoch,
            assignor_name=name,
            members=tuple(specs),
            topics=topics,
        )
    )
    return u.result(
        Prepare(
            error=KafkaErrorCode.NONE,
            group_epoch=group.group_epoch,
            assignor_name=name,
            members=tuple(described),
            topics=tuple(
                PreparedTopic(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions)
                for t in topics
            ),
        )
    )


def install_assignment(
    group: ConsumerGroup | None, request: ConsumerGroupInstallAssignmentRequest, ctx: WriteContext
) -> Result[Install]:
    u = GroupUpdate(group, request.group_id, ctx)
    failed = _check(group, request.group_id, request.member_id, request.member_epoch)
    if failed is not None:
        return u.result(Install(error=failed[0], error_message=failed[1]))
    assert group is not None
    prepared = group.prepared
    if (
        prepared is None
        or prepared.member_id != request.member_id
        or prepared.group_epoch != request.group_epoch
    ):
        return u.result(
            Install(
                error=INVALID_ASSIGNMENT,
                error_message=f"INVALID_ASSIGNMENT: no PrepareAssignment at epoch {request.group_epoch}.",
            )
        )
    try:
        installed = validate_installed(prepared, request.members)
    except InvalidAssignment as exc:
        return u.result(Install(error=INVALID_ASSIGNMENT, error_message=f"INVALID_ASSIGNMENT: {exc}"))

    gid = group.group_id
    old = {m: t for m in group.members if (t := group.target(m)) is not None}
    new = {}
    for member_id in group.members:  # members that joined after the prepared epoch get nothing yet
        partitions, entry = installed.get(member_id, (EMPTY_PARTITIONS, None))
        new[member_id] = TargetAssignmentMemberRecord(
            group_id=gid,
            member_id=member_id,
            partitions=partitions,
            error=request.error,
            metadata_version=0 if entry is None else entry.metadata_version,
            metadata_bytes=b"" if entry is None else entry.metadata_bytes,
        )
    for record in target_records(
        gid, old, new, epoch=request.group_epoch, assignor_name=prepared.assignor_name
    ):
        u.emit(record)
    u.drop_client_request()
    if u.group_epoch > u.assignment_epoch:
        # Computed for an older epoch: installed, and a new computation is asked for at once.
        u.ask_member(previous=request.member_id)
    return u.result(Install(error=KafkaErrorCode.NONE))
