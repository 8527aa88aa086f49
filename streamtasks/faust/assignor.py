"""A drop-in partition assignor for faust-streaming apps, placing with streamtasks.

::

    app = faust.App("fx", broker=..., store="rocksdb://",
                    PartitionAssignor="streamtasks.faust:StreamtasksAssignor")

It is faust's own ``PartitionAssignor`` (protocol name ``"faust"``, version 4, the same
``ClientMetadata``, so workers can be switched one by one) with the leader step replaced by
:func:`streamtasks.streams.faust_placement.place_faust`: actives go to members whose table state
is caught up, standbys are placed lag-aware, and a member that has to take over state first
warms it up as a standby. What it adds to faust's JSON (faust ignores keys it does not know):

* in the subscription, ``"streamtasks": {"offsets": [[topic, partition, offset], ...],
  "highwaters": [...]}``: per changelog partition, the last offset the member's local store
  holds (``persisted_offset``; a memory store has none, so faust's default ``memory://`` store
  never counts as caught up) and the high watermark it last saw;
* in the assignment, ``"streamtasks": {"warmups": [[topic, partition], ...]}``: the changelog
  partitions this member warms up. While it has any, the member checks every
  ``lag_check_interval_s`` whether its standby recovery has come within
  ``acceptable_recovery_lag`` of the high watermark, and then asks its consumer to rejoin
  (faust runs on aiokafka, so the rebalance is eager), so the active moves without waiting.

Tune it by subclassing (class attributes below) or with :func:`configured`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import zlib
from collections.abc import MutableMapping
from typing import Any, ClassVar

from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from faust.assignor import PartitionAssignor
from faust.assignor.client_assignment import ClientAssignment

import assignors as assignor_registry
from assignors.types import AssignmentConfigs
from streamtasks.errors import DecodeError
from streamtasks.protocol.faust_compat import decode_faust_client_metadata
from streamtasks.streams.faust_placement import FaustMemberState, place_faust
from topology.ids import TopicPartition

__all__ = ["StreamtasksAssignor", "configured"]

log = logging.getLogger("streamtasks.faust")

_KEY = "streamtasks"


def _triples(values: dict[TopicPartition, int]) -> list[list[Any]]:
    return [[tp.topic, tp.partition, off] for tp, off in sorted(values.items())]


def _from_triples(value: Any) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    if not isinstance(value, list):
        return out
    for item in value:
        if (
            isinstance(item, list)
            and len(item) == 3
            and isinstance(item[0], str)
            and all(isinstance(x, int) and not isinstance(x, bool) for x in item[1:])
        ):
            out[TopicPartition(item[0], item[1])] = item[2]
    return out


class StreamtasksAssignor(PartitionAssignor):
    """See the module docstring."""

    task_assignor: ClassVar[str] = "high_availability"
    acceptable_recovery_lag: ClassVar[int] = 10_000
    max_warmup_replicas: ClassVar[int] = 2
    lag_check_interval_s: ClassVar[float] = 1.0

    def __init__(self, app: Any, replicas: int = 0) -> None:
        super().__init__(app, replicas=replicas)
        self._warmups: tuple[TopicPartition, ...] = ()
        self._highwaters: dict[TopicPartition, int] = {}
        self._watcher: asyncio.Task[None] | None = None
        #: What the last leader step decided (for logs and tests): problems, warm-ups, follow-up.
        self.last_placement: Any = None

    # -- member -----------------------------------------------------------------------------

    def _changelog_positions(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for table in self.app.tables.values():
            topic = table._changelog_topic_name()
            for p in range(table.partitions or self.app.conf.topic_partitions):
                try:
                    offset = table.data.persisted_offset(_tp(topic, p))
                except Exception:  # a store that cannot tell (faust's base raises)
                    offset = None
                if offset is not None and offset >= 0:
                    out[TopicPartition(topic, p)] = int(offset)
        return out

    def _seen_highwaters(self) -> dict[TopicPartition, int]:
        recovery: Any = getattr(self.app.tables, "recovery")  # noqa: B009 (TableManagerT does not declare it)
        for counter in (recovery.active_highwaters, recovery.standby_highwaters):
            for tp, hw in list(counter.items()):
                if hw is not None and hw >= 0:
                    key = TopicPartition(tp.topic, tp.partition)
                    # faust keeps the last offset (end - 1) as its high water mark.
                    self._highwaters[key] = max(self._highwaters.get(key, 0), int(hw) + 1)
        return dict(self._highwaters)

    def metadata(self, topics: Any) -> ConsumerProtocolMemberMetadata:
        doc = json.loads(self._metadata.dumps())
        doc[_KEY] = {
            "offsets": _triples(self._changelog_positions()),
            "highwaters": _triples(self._seen_highwaters()),
        }
        return ConsumerProtocolMemberMetadata(self.version, list(topics), json.dumps(doc).encode())

    def on_assignment(self, assignment: Any) -> None:
        super().on_assignment(assignment)
        try:
            doc = json.loads(zlib.decompress(assignment.user_data))
        except (zlib.error, ValueError):
            doc = {}
        extra = doc.get(_KEY) if isinstance(doc, dict) else None
        warm = extra.get("warmups", []) if isinstance(extra, dict) else []
        self._warmups = tuple(
            TopicPartition(t, p) for t, p in (w for w in warm if isinstance(w, list) and len(w) == 2)
        )
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
        if self._warmups:
            log.info("warming up %s; a rebalance follows once caught up", [str(tp) for tp in self._warmups])
            self._watcher = asyncio.get_running_loop().create_task(self._watch_warmups(self._warmups))

    def warmup_caught_up(self, warmups: tuple[TopicPartition, ...]) -> bool:
        """Has any warm-up come within ``acceptable_recovery_lag`` of its high watermark?"""
        recovery: Any = getattr(self.app.tables, "recovery")  # noqa: B009 (TableManagerT does not declare it)
        for tp in warmups:
            ftp = _tp(tp.topic, tp.partition)
            offset = recovery.standby_offsets.get(ftp)
            hw = recovery.standby_highwaters.get(ftp)
            if hw is None:
                continue
            if hw < 0 or (offset is not None and hw - offset <= self.acceptable_recovery_lag):
                return True
        return False

    async def _watch_warmups(self, warmups: tuple[TopicPartition, ...]) -> None:
        started = time.monotonic()
        while True:
            await asyncio.sleep(self.lag_check_interval_s)
            if self.warmup_caught_up(warmups):
                log.info(
                    "a warm-up caught up after %.1f s: asking for a rebalance", time.monotonic() - started
                )
                with contextlib.suppress(AttributeError):
                    consumer: Any = self.app.consumer
                    consumer._thread._ensure_consumer()._coordinator.request_rejoin()
                return

    # -- leader -----------------------------------------------------------------------------

    def _perform_assignment(
        self, cluster: Any, member_metadata: MutableMapping[str, Any]
    ) -> MutableMapping[str, ConsumerProtocolMemberAssignment]:
        states: dict[str, FaustMemberState] = {}
        extras: dict[str, dict[str, Any]] = {}
        for member_id, metadata in member_metadata.items():
            try:
                meta = decode_faust_client_metadata(metadata.user_data)
            except DecodeError:
                log.warning(
                    "member %s sent unreadable faust metadata; faust's own assignor answers", member_id
                )
                return super()._perform_assignment(cluster, member_metadata)
            raw = json.loads(metadata.user_data).get(_KEY)
            extras[member_id] = raw if isinstance(raw, dict) else {}
            states[member_id] = FaustMemberState(
                topics=tuple(metadata.subscription),
                url=meta.url,
                actives=meta.actives,
                standbys=meta.standbys,
                offsets=_from_triples(extras[member_id].get("offsets")),
                highwaters=_from_triples(extras[member_id].get("highwaters")),
            )
        topics = {t for s in states.values() for t in s.topics}
        counts = {t: len(cluster.partitions_for_topic(t) or ()) for t in topics}
        placement = place_faust(
            states,
            counts,
            changelog_topics=frozenset(self._table_manager.changelog_topics),
            task_assignor=assignor_registry.get(self.task_assignor),
            configs=AssignmentConfigs(
                num_standby_replicas=self.replicas,
                acceptable_recovery_lag=self.acceptable_recovery_lag,
                max_warmup_replicas=self.max_warmup_replicas,
            ),
            now_ms=int(time.time() * 1000),
        )
        self.last_placement = placement
        log.info(
            "streamtasks placement: %s; warm-ups %s",
            {states[m].url: dict(out.actives) for m, out in placement.members.items()},
            {states[m].url: [str(tp) for tp in w] for m, w in placement.warmups.items() if w},
        )
        for problem in placement.problems:
            log.warning("leader: %s", problem)
        self._member_urls = {m: s.url for m, s in states.items()}
        assignments = {
            m: ClientAssignment(
                actives={t: list(ps) for t, ps in out.actives.items()},
                standbys={t: list(ps) for t, ps in out.standbys.items()},
            )
            for m, out in placement.members.items()
        }
        answers = self._protocol_assignments(
            assignments,
            self._get_changelog_distribution(assignments),
            self._get_external_topic_distribution(assignments),
            dict(placement.topic_groups),
        )
        for member_id, answer in answers.items():
            warm = placement.warmups.get(member_id, ())
            if warm:
                doc = json.loads(self._decompress(answer.user_data))
                doc[_KEY] = {"warmups": [[tp.topic, tp.partition] for tp in warm]}
                answers[member_id] = ConsumerProtocolMemberAssignment(
                    answer.version, answer.assignment, self._compress(json.dumps(doc).encode())
                )
        return answers


def _tp(topic: str, partition: int) -> Any:
    from faust.types import TP

    return TP(topic, partition)


def configured(**settings: Any) -> type[StreamtasksAssignor]:
    """A :class:`StreamtasksAssignor` subclass with other class attributes, e.g.
    ``PartitionAssignor=configured(acceptable_recovery_lag=100)``."""
    unknown = sorted(
        set(settings)
        - {"task_assignor", "acceptable_recovery_lag", "max_warmup_replicas", "lag_check_interval_s"}
    )
    if unknown:
        from streamtasks.errors import ConfigError

        raise ConfigError(f"unknown StreamtasksAssignor settings {unknown}")
    return type("ConfiguredStreamtasksAssignor", (StreamtasksAssignor,), dict(settings))
