"""streamtasks' own userdata: ``SubscriptionInfo`` (member → leader) and ``AssignmentInfo``
(leader → member), carried in the consumer protocol's ``UserData``.

Every version of both begins with ``int32 version, int32 latest_supported_version``, and every
version of ``SubscriptionInfo``, past and future, continues with the 16-byte process id, so a
leader can read who a member is and what it speaks whatever version it sent (version probing).
The byte layout of each version is in ``docs/protocol.md``; in short:

=========  ==================================================================================
version    SubscriptionInfo
=========  ==================================================================================
1          process id, previous active tasks, previous standby tasks
2          process id, task offset sums (replacing the two sets), endpoint, capacity
3          v2 + rack, client tags, topology fingerprint, error code
=========  ==================================================================================

=========  ==================================================================================
version    AssignmentInfo
=========  ==================================================================================
1          active tasks, standby tasks (warm-ups included), error code
2          active, standby, warm-up tasks, active tasks by host, next rebalance time, error code
3          v2 + standby tasks by host, acceptable recovery lag
=========  ==================================================================================

Numbers are unsigned LEB128 varints; task collections are grouped by subtopology and
gap-coded (see :mod:`streamtasks.protocol._tasks`). Decoders accept only the canonical form
and reject trailing bytes of a version they know.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypeVar

from streamtasks.errors import DecodeError, LocalProtocolError, StreamTasksError
from streamtasks.protocol import _tasks
from streamtasks.protocol._buf import INT32_MAX, INT64_MAX, Reader, Writer
from topology.ids import TaskId

__all__ = [
    "EARLIEST_PROBEABLE_VERSION",
    "LATEST_VERSION",
    "MIN_SUPPORTED_VERSION",
    "RUNNING_OFFSET_SUM",
    "UNKNOWN_OFFSET_SUM",
    "AssignmentInfo",
    "AssignorErrorCode",
    "SubscriptionInfo",
    "decode_assignment_info",
    "decode_subscription_info",
    "encode_assignment_info",
    "encode_subscription_info",
    "offset_sums_from_sets",
    "peek_version",
]

#: The newest userdata version this code reads and writes.
LATEST_VERSION = 3
#: The oldest version this code still reads and writes.
MIN_SUPPORTED_VERSION = 1
#: Every version carries the probing header, so probing works from the first one.
EARLIEST_PROBEABLE_VERSION = 1

#: Offset sum of a task the member runs as active right now (Kafka Streams' ``Task.LATEST_OFFSET``).
RUNNING_OFFSET_SUM = -2
#: Offset sum of a task the member has state for but cannot quantify (Kafka Streams'
#: ``SubscriptionInfo.UNKNOWN_OFFSET_SUM``; what v1's standby set decodes to).
UNKNOWN_OFFSET_SUM = -3

_FINGERPRINT_SIZE = 16


class AssignorErrorCode(enum.IntEnum):
    """Error codes in userdata; 0-4 are Kafka Streams' ``AssignorError`` codes."""

    NONE = 0
    INCOMPLETE_SOURCE_TOPIC_METADATA = 1
    VERSION_PROBING = 2
    ASSIGNMENT_ERROR = 3
    SHUTDOWN_REQUESTED = 4
    #: Members run topologies with different fingerprints.
    INCONSISTENT_TOPOLOGY = 5


def _check_versions(version: int, latest: int, what: str) -> None:
    if not MIN_SUPPORTED_VERSION <= version <= INT32_MAX:
        raise LocalProtocolError(f"{what}: version {version} is not in [1, {INT32_MAX}]")
    if not version <= latest <= INT32_MAX:
        raise LocalProtocolError(f"{what}: latest_supported_version {latest} must be >= version {version}")


def _error_code_of(code: int) -> AssignorErrorCode:
    try:
        return AssignorErrorCode(code)
    except ValueError:
        raise LocalProtocolError(f"unknown error code {code!r}") from None


def _check_tasks(tasks: Iterable[TaskId], what: str) -> None:
    for t in tasks:
        if not isinstance(t, TaskId):
            raise LocalProtocolError(f"{what}: {t!r} is not a TaskId")
        if t.subtopology > INT32_MAX or t.partition > INT32_MAX:
            raise LocalProtocolError(f"{what}: task {t} does not fit in int32 ids")


def offset_sums_from_sets(
    previous_active: Iterable[TaskId], previous_standby: Iterable[TaskId]
) -> dict[TaskId, int]:
    """The offset sums v1's two sets stand for: running actives and standbys of unknown lag."""
    sums = dict.fromkeys(previous_standby, UNKNOWN_OFFSET_SUM)
    sums.update(dict.fromkeys(previous_active, RUNNING_OFFSET_SUM))
    return sums


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionInfo:
    """What a member tells the leader.

    ``task_offset_sums``: for every task with local state, the sum of its changelog offsets,
    :data:`RUNNING_OFFSET_SUM` for tasks it runs as active now, :data:`UNKNOWN_OFFSET_SUM` when
    it cannot tell. ``previous_active`` / ``previous_standby`` derive from it, as in Streams.
    A decoded subscription of a version newer than :data:`LATEST_VERSION` carries only the
    header and the process id; every other field has its default.
    """

    process_id: uuid.UUID
    task_offset_sums: Mapping[TaskId, int] = field(default_factory=dict)
    endpoint: str | None = None
    capacity: int = 1
    rack: str | None = None
    client_tags: Mapping[str, str] = field(default_factory=dict)
    topology_fingerprint: bytes | None = None
    error_code: AssignorErrorCode = AssignorErrorCode.NONE
    version: int = LATEST_VERSION
    latest_supported_version: int = LATEST_VERSION

    def __post_init__(self) -> None:
        _check_versions(self.version, self.latest_supported_version, "SubscriptionInfo")
        if not isinstance(self.process_id, uuid.UUID):
            raise LocalProtocolError(f"process_id must be a UUID, got {self.process_id!r}")
        _check_tasks(self.task_offset_sums, "task_offset_sums")
        for task, offset_sum in self.task_offset_sums.items():
            if not (0 <= offset_sum <= INT64_MAX or offset_sum in (RUNNING_OFFSET_SUM, UNKNOWN_OFFSET_SUM)):
                raise LocalProtocolError(
                    f"offset sum {offset_sum} of task {task} is neither >= 0 (and an int64) nor a sentinel "
                    f"({RUNNING_OFFSET_SUM} running, {UNKNOWN_OFFSET_SUM} unknown)"
                )
        for key, tag in self.client_tags.items():
            if not isinstance(key, str) or not isinstance(tag, str):
                raise LocalProtocolError(f"client tag {key!r}={tag!r} is not a pair of strings")
        if not 1 <= self.capacity <= INT32_MAX:
            raise LocalProtocolError(f"capacity must be in [1, {INT32_MAX}], got {self.capacity}")
        fp = self.topology_fingerprint
        if fp is not None and (not isinstance(fp, bytes) or len(fp) != _FINGERPRINT_SIZE):
            raise LocalProtocolError(f"topology_fingerprint must be {_FINGERPRINT_SIZE} bytes, got {fp!r}")
        object.__setattr__(self, "error_code", _error_code_of(self.error_code))
        object.__setattr__(self, "task_offset_sums", MappingProxyType(dict(self.task_offset_sums)))
        object.__setattr__(self, "client_tags", MappingProxyType(dict(self.client_tags)))

    @property
    def previous_active(self) -> frozenset[TaskId]:
        return frozenset(t for t, s in self.task_offset_sums.items() if s == RUNNING_OFFSET_SUM)

    @property
    def previous_standby(self) -> frozenset[TaskId]:
        return frozenset(t for t, s in self.task_offset_sums.items() if s != RUNNING_OFFSET_SUM)

    def as_version(self, version: int) -> SubscriptionInfo:
        """What survives encoding at ``version`` and decoding again."""
        if not MIN_SUPPORTED_VERSION <= version <= LATEST_VERSION:
            raise LocalProtocolError(f"cannot encode SubscriptionInfo v{version}; latest is {LATEST_VERSION}")
        latest = max(version, self.latest_supported_version)
        out = replace(self, version=version, latest_supported_version=latest)
        if version < 3:
            out = replace(
                out, rack=None, client_tags={}, topology_fingerprint=None, error_code=AssignorErrorCode.NONE
            )
        if version < 2:
            sums = offset_sums_from_sets(self.previous_active, self.previous_standby)
            out = replace(out, task_offset_sums=sums, endpoint=None, capacity=1)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignmentInfo:
    """What the leader tells one member.

    ``active_tasks`` are tasks whose partitions are in this member's consumer-protocol
    assignment (the partition list stays the source of truth; a cooperative leader leaves out
    tasks whose partitions are still being revoked elsewhere). ``warmup_tasks`` are standbys
    that catch up to take over a task (KIP-441); v1 has no separate set and carries them among
    the standbys. ``latest_supported_version`` is the group's commonly supported latest version
    as the leader saw it. ``next_rebalance_ms`` is an absolute time on the leader's clock.
    """

    active_tasks: frozenset[TaskId] = frozenset()
    standby_tasks: frozenset[TaskId] = frozenset()
    warmup_tasks: frozenset[TaskId] = frozenset()
    active_tasks_by_host: Mapping[str, frozenset[TaskId]] = field(default_factory=dict)
    standby_tasks_by_host: Mapping[str, frozenset[TaskId]] = field(default_factory=dict)
    error_code: AssignorErrorCode = AssignorErrorCode.NONE
    next_rebalance_ms: int | None = None
    acceptable_recovery_lag: int | None = None
    version: int = LATEST_VERSION
    latest_supported_version: int = LATEST_VERSION

    def __post_init__(self) -> None:
        _check_versions(self.version, self.latest_supported_version, "AssignmentInfo")
        for name in ("active_tasks", "standby_tasks", "warmup_tasks"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
            _check_tasks(getattr(self, name), name)
        for a, b in (
            ("active_tasks", "standby_tasks"),
            ("active_tasks", "warmup_tasks"),
            ("standby_tasks", "warmup_tasks"),
        ):
            both = getattr(self, a) & getattr(self, b)
            if both:
                raise LocalProtocolError(f"tasks {sorted(map(str, both))} are in both {a} and {b}")
        for name in ("active_tasks_by_host", "standby_tasks_by_host"):
            by_host = {h: frozenset(ts) for h, ts in getattr(self, name).items()}
            for host, ts in by_host.items():
                if not isinstance(host, str):
                    raise LocalProtocolError(f"{name}: host {host!r} is not a string")
                _check_tasks(ts, f"{name}[{host}]")
            object.__setattr__(self, name, MappingProxyType(by_host))
        for name in ("next_rebalance_ms", "acceptable_recovery_lag"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < INT64_MAX:
                raise LocalProtocolError(f"{name} must be None or in [0, {INT64_MAX}), got {value}")
        object.__setattr__(self, "error_code", _error_code_of(self.error_code))

    def as_version(self, version: int) -> AssignmentInfo:
        """What survives encoding at ``version`` and decoding again."""
        if not MIN_SUPPORTED_VERSION <= version <= LATEST_VERSION:
            raise LocalProtocolError(f"cannot encode AssignmentInfo v{version}; latest is {LATEST_VERSION}")
        latest = max(version, self.latest_supported_version)
        out = replace(self, version=version, latest_supported_version=latest)
        if version < 3:
            out = replace(out, standby_tasks_by_host={}, acceptable_recovery_lag=None)
        if version < 2:
            out = replace(
                out,
                standby_tasks=self.standby_tasks | self.warmup_tasks,
                warmup_tasks=frozenset(),
                active_tasks_by_host={},
                next_rebalance_ms=None,
            )
        return out


# -- the header -------------------------------------------------------------------------------


def _read_header(r: Reader) -> tuple[int, int]:
    version = r.int32()
    latest = r.int32()
    if version < MIN_SUPPORTED_VERSION:
        raise r.fail(f"unknown version {version} (versions start at {MIN_SUPPORTED_VERSION})")
    if latest < version:
        raise r.fail(f"latest_supported_version {latest} is below version {version}")
    return version, latest


def peek_version(data: bytes) -> tuple[int, int]:
    """``(version, latest_supported_version)`` of any userdata, of any version (reads 8 bytes)."""
    return _read_header(Reader(data, "streamtasks userdata header"))


def _encode_version(info_version: int, version: int | None, what: str) -> int:
    v = info_version if version is None else version
    if not MIN_SUPPORTED_VERSION <= v <= LATEST_VERSION:
        raise LocalProtocolError(
            f"cannot encode {what} v{v}; this code writes v{MIN_SUPPORTED_VERSION}..v{LATEST_VERSION}"
        )
    return v


_T = TypeVar("_T")


def _finish(r: Reader, build: Callable[[], _T]) -> _T:
    if r.remaining:
        raise r.fail(f"{r.remaining} unexpected trailing byte(s)")
    try:
        return build()
    except DecodeError:
        raise
    except (StreamTasksError, ValueError) as exc:
        raise r.fail(str(exc)) from None


# -- SubscriptionInfo -------------------------------------------------------------------------


def encode_subscription_info(info: SubscriptionInfo, version: int | None = None) -> bytes:
    """Encode at ``version`` (default ``info.version``); fields the version lacks are dropped."""
    v = _encode_version(info.version, version, "SubscriptionInfo")
    w = Writer()
    w.int32(v, "version")
    w.int32(max(v, info.latest_supported_version), "latest_supported_version")
    w.raw(info.process_id.bytes)
    if v == 1:
        _tasks.write_task_set(w, info.previous_active, "previous_active")
        _tasks.write_task_set(w, info.previous_standby, "previous_standby")
        return w.getvalue()
    _tasks.write_offset_sums(w, info.task_offset_sums, "task_offset_sums")
    w.nullable_vstring(info.endpoint, "endpoint")
    w.uvarint(info.capacity, "capacity")
    if v >= 3:
        w.nullable_vstring(info.rack, "rack")
        _tasks.write_client_tags(w, info.client_tags, "client_tags")
        if info.topology_fingerprint is None:
            w.uvarint(0)
        else:
            w.uvarint(1)
            w.raw(info.topology_fingerprint)
        w.uvarint(int(info.error_code), "error_code")
    return w.getvalue()


def _error_code(r: Reader) -> AssignorErrorCode:
    code = r.uvarint("error_code", INT32_MAX)
    try:
        return AssignorErrorCode(code)
    except ValueError:
        raise r.fail(f"unknown error code {code}") from None


def _reading_limit(latest: int) -> int:
    if not MIN_SUPPORTED_VERSION <= latest <= LATEST_VERSION:
        raise LocalProtocolError(
            f"a reader's latest version must be in [{MIN_SUPPORTED_VERSION}, {LATEST_VERSION}], got {latest}"
        )
    return latest


def decode_subscription_info(data: bytes, *, latest: int = LATEST_VERSION) -> SubscriptionInfo:
    """Decode any known version; a future version (above ``latest``: this code's latest, or an
    emulated older release's) yields its header and process id only."""
    limit = _reading_limit(latest)
    r = Reader(data, "SubscriptionInfo")
    version, supported = _read_header(r)
    process_id = r.uuid()
    if version > limit:
        return SubscriptionInfo(process_id=process_id, version=version, latest_supported_version=supported)
    if version == 1:
        active = _tasks.read_task_set(r, "previous_active")
        standby = _tasks.read_task_set(r, "previous_standby")
        if active & standby:
            raise r.fail(f"tasks {sorted(map(str, active & standby))} are both previous active and standby")
        sums = offset_sums_from_sets(active, standby)
        return _finish(
            r,
            lambda: SubscriptionInfo(
                process_id=process_id,
                task_offset_sums=sums,
                version=version,
                latest_supported_version=supported,
            ),
        )
    sums = _tasks.read_offset_sums(r, "task_offset_sums")
    endpoint = r.nullable_vstring("endpoint")
    capacity = r.uvarint("capacity", INT32_MAX)
    rack: str | None = None
    tags: dict[str, str] = {}
    fingerprint: bytes | None = None
    error = AssignorErrorCode.NONE
    if version >= 3:
        rack = r.nullable_vstring("rack")
        tags = _tasks.read_client_tags(r, "client_tags")
        flag = r.uvarint("topology_fingerprint flag", 1)
        fingerprint = r.raw(_FINGERPRINT_SIZE) if flag else None
        error = _error_code(r)
    return _finish(
        r,
        lambda: SubscriptionInfo(
            process_id=process_id,
            task_offset_sums=sums,
            endpoint=endpoint,
            capacity=capacity,
            rack=rack,
            client_tags=tags,
            topology_fingerprint=fingerprint,
            error_code=error,
            version=version,
            latest_supported_version=supported,
        ),
    )


# -- AssignmentInfo ---------------------------------------------------------------------------


def encode_assignment_info(info: AssignmentInfo, version: int | None = None) -> bytes:
    """Encode at ``version`` (default ``info.version``); v1 folds warm-ups into the standbys."""
    v = _encode_version(info.version, version, "AssignmentInfo")
    w = Writer()
    w.int32(v, "version")
    w.int32(max(v, info.latest_supported_version), "latest_supported_version")
    _tasks.write_task_set(w, info.active_tasks, "active_tasks")
    if v == 1:
        _tasks.write_task_set(w, info.standby_tasks | info.warmup_tasks, "standby_tasks")
        w.uvarint(int(info.error_code), "error_code")
        return w.getvalue()
    _tasks.write_task_set(w, info.standby_tasks, "standby_tasks")
    _tasks.write_task_set(w, info.warmup_tasks, "warmup_tasks")
    _tasks.write_host_tasks(w, info.active_tasks_by_host, "active_tasks_by_host")
    _write_optional(w, info.next_rebalance_ms, "next_rebalance_ms")
    w.uvarint(int(info.error_code), "error_code")
    if v >= 3:
        _tasks.write_host_tasks(w, info.standby_tasks_by_host, "standby_tasks_by_host")
        _write_optional(w, info.acceptable_recovery_lag, "acceptable_recovery_lag")
    return w.getvalue()


def _write_optional(w: Writer, value: int | None, name: str) -> None:
    """``None`` as 0, a value ``n >= 0`` as ``n + 1``."""
    w.uvarint(0 if value is None else value + 1, name)


def _read_optional(r: Reader, name: str) -> int | None:
    raw = r.uvarint(name, INT64_MAX)
    return None if raw == 0 else raw - 1


def decode_assignment_info(data: bytes, *, latest: int = LATEST_VERSION) -> AssignmentInfo:
    """Decode a version this code knows; one above ``latest`` (this code's latest, or an
    emulated older release's) is a :class:`DecodeError` (the leader never sends a member more
    than the version it subscribed with)."""
    limit = _reading_limit(latest)
    r = Reader(data, "AssignmentInfo")
    version, supported = _read_header(r)
    if version > limit:
        raise r.fail(
            f"version {version} is newer than the latest this member reads ({limit}); "
            "a leader answers at most the version it was sent"
        )
    active = _tasks.read_task_set(r, "active_tasks")
    standby = _tasks.read_task_set(r, "standby_tasks")
    if version == 1:
        error = _error_code(r)
        return _finish(
            r,
            lambda: AssignmentInfo(
                active_tasks=active,
                standby_tasks=standby,
                error_code=error,
                version=version,
                latest_supported_version=supported,
            ),
        )
    warmup = _tasks.read_task_set(r, "warmup_tasks")
    active_by_host = _tasks.read_host_tasks(r, "active_tasks_by_host")
    next_rebalance_ms = _read_optional(r, "next_rebalance_ms")
    error = _error_code(r)
    standby_by_host: dict[str, frozenset[TaskId]] = {}
    lag: int | None = None
    if version >= 3:
        standby_by_host = _tasks.read_host_tasks(r, "standby_tasks_by_host")
        lag = _read_optional(r, "acceptable_recovery_lag")
    return _finish(
        r,
        lambda: AssignmentInfo(
            active_tasks=active,
            standby_tasks=standby,
            warmup_tasks=warmup,
            active_tasks_by_host=active_by_host,
            standby_tasks_by_host=standby_by_host,
            error_code=error,
            next_rebalance_ms=next_rebalance_ms,
            acceptable_recovery_lag=lag,
            version=version,
            latest_supported_version=supported,
        ),
    )
