"""The processes the KIP-848 world starts: a KIP-848 member (the coordinator's assignor, or the
streams assignor run client-side) or, in a mixed group, a classic-protocol member.

:class:`MemberFactory` turns a start step into a process; a client-side member's subscription
carries the task offset sums of the tasks its name last owned (the ledger remembers them)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import AssignmentConfigs
from streamtasks.membership.classic import MemberConfig
from streamtasks.membership.consumer import AssignorMetadata, ConsumerMemberConfig
from streamtasks.protocol.userdata import LATEST_VERSION, MIN_SUPPORTED_VERSION
from streamtasks.sim.kip848.process import ClassicProcess, ConsumerProcess, WorldProcess
from streamtasks.sim.ledger import OwnershipLedger
from streamtasks.sim.process import make_assignor
from streamtasks.sim.scenario import Scenario, Step
from streamtasks.streams import LastTaskTable, StreamsPartitionAssignor
from topology import TopologyBuilder
from topology.ids import TaskId

__all__ = ["CLIENT", "MODES", "SERVER", "MemberFactory"]

#: ``--protocol consumer``: the coordinator's ``uniform`` assignor.
SERVER = "consumer"
#: ``--protocol consumer-client``: the streams assignor (standbys) run by a member.
CLIENT = "consumer-client"
MODES = (SERVER, CLIENT)


class MemberFactory:
    """Makes the processes of one KIP-848 world (``mode``: :data:`SERVER` or :data:`CLIENT`)."""

    def __init__(
        self,
        scenario: Scenario,
        mode: str,
        *,
        group_id: str,
        session_timeout_ms: int,
        standby_replicas: int,
        counts: dict[str, int],
        ledger: OwnershipLedger,
        now_ms: Callable[[], int],
    ) -> None:
        self.scenario = scenario
        self.mode = mode
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.standby_replicas = standby_replicas
        self.counts = counts
        self.ledger = ledger
        self._now = now_ms
        builder = TopologyBuilder("sim")
        for i, (topic, _) in enumerate(scenario.topics):
            builder.stream(topic).store(f"store{i}")
        self.topology = builder.build()
        #: The topology's tasks at the last partition counts (rebuilt only when a topic grew).
        self._tables = LastTaskTable(self.topology)

    def new_process(self, step: Step, static: bool, incarnation: int) -> WorldProcess:
        name = step.member
        if step.group_protocol == "classic":
            return self._classic(name, incarnation, static, step.assignors or ("cooperative_sticky",))
        t = self.scenario.timeouts
        common: dict[str, Any] = {
            "group_id": self.group_id,
            "member_id": f"{name}-{incarnation}",
            "topics": tuple(self.counts),
            "group_instance_id": name if static else None,
            "rebalance_timeout_ms": t.rebalance_ms,
            "session_timeout_ms": self.session_timeout_ms,
            "heartbeat_interval_ms": t.heartbeat_ms,
            "request_timeout_ms": t.request_ms,
            "retry_backoff_ms": t.retry_backoff_ms,
        }
        if self.mode == CLIENT:
            config = self._client_side(name, common)
        else:
            named = step.group_protocol == "consumer" and step.assignors
            server = step.assignors[0] if named else "uniform"
            config = ConsumerMemberConfig(**common, server_assignor=server)
        return ConsumerProcess(name=name, incarnation=incarnation, config=config, now_ms=self._now())

    def _client_side(self, name: str, common: dict[str, Any]) -> ConsumerMemberConfig:
        """A member that runs the streams assignor (standbys) when the coordinator asks."""
        assignor = StreamsPartitionAssignor(
            self.topology,
            task_assignor=HighAvailabilityTaskAssignor(),
            configs=AssignmentConfigs(num_standby_replicas=self.standby_replicas),
            end_offsets=dict,
            now_ms=self._now,
        )
        data = assignor.subscription_user_data(
            process_id=uuid.uuid5(uuid.NAMESPACE_URL, f"streamtasks-sim/{name}"),
            task_offset_sums=self._state_on_disk(name),
        )
        return ConsumerMemberConfig(
            **common,
            client_assignors=(assignor,),
            assignor_metadata={
                assignor.name: AssignorMetadata(
                    minimum_version=MIN_SUPPORTED_VERSION,
                    maximum_version=LATEST_VERSION,
                    metadata_version=LATEST_VERSION,
                    metadata_bytes=data,
                )
            },
        )

    def _classic(
        self, name: str, incarnation: int, static: bool, assignors: tuple[str, ...]
    ) -> ClassicProcess:
        """A classic-protocol member (the real classic member machine) in the consumer group.

        ``lose_on_missed_generation`` is off: its generation is its member epoch, which moves
        with the group epoch, so a jump of more than one is no missed generation here."""
        t = self.scenario.timeouts
        config = MemberConfig(
            group_id=self.group_id,
            topics=tuple(self.counts),
            assignors=tuple(make_assignor(n) for n in assignors),
            group_instance_id=name if static else None,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=t.rebalance_ms,
            heartbeat_interval_ms=t.heartbeat_ms,
            request_timeout_ms=t.request_ms,
            retry_backoff_ms=t.retry_backoff_ms,
            followup_heartbeat_ms=t.followup_heartbeat_ms,
            lose_on_missed_generation=False,
        )
        return ClassicProcess(name=name, incarnation=incarnation, config=config, now_ms=self._now())

    def _state_on_disk(self, name: str) -> dict[TaskId, int]:
        """A restarted process has local state for the tasks it last owned (offset sum 100).
        The task of each partition comes from a table kept per partition counts: rebuilding it
        at every process start was 62 % of a 2,000-member client-side run (docs/spark.md)."""
        task_of = self._tables.get(self.counts).partition_task
        last = self.ledger.last_owner_name
        owned = [tp for tp, owner in last.items() if owner == name and tp in task_of]
        return {task_of[tp]: 100 for tp in sorted(owned)}
