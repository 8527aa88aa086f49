"""The demo's options (``streamtasks demo``): the cluster, the protocol, the phases and the
Tansu workarounds; read by the demo (:mod:`streamtasks.drills.demo`) and by the preparation of
its cluster (:mod:`streamtasks.drills.demo_cluster`)."""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.runtime.security import SecuritySettings

__all__ = ["DemoOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoOptions:
    bootstrap_servers: str | None = None
    #: The cluster's TLS/SASL settings (``--client-config``; its bootstrap servers are
    #: ``bootstrap_servers``'): None is PLAINTEXT.
    client: SecuritySettings | None = None
    #: Run on the secured embedded Apache Kafka (SASL_SSL, SCRAM-SHA-512, ACLs) instead.
    secure: bool = False
    #: Prefix of the topic, group and application names (``secure-`` under ``secure``: the
    #: names the secured broker's ACLs grant its ``app`` user).
    name_prefix: str = ""
    #: The embedded broker when no cluster is given: ``auto``, ``kafka`` or ``tansu``
    #: (None: ``$STREAMTASKS_BROKER``, else the default; streamtasks.embedded.choose_broker).
    broker: str | None = None
    protocol: str = "cooperative"
    #: ``bounce`` (rolling bounces of consumer workers) and ``stateful`` (streamtasks.App
    #: workers: kill -9 with standbys, scale-out with warm-ups; drills/stateful_demo.py);
    #: ``dynamic``: the bounce phase's start and its dynamic members' bounce only (the shortest
    #: run with rebalances).
    phases: tuple[str, ...] = ("bounce", "stateful")
    workers: int = 3
    partitions: int = 12
    rate: int = 200
    settle_timeout_s: float = 120.0
    #: Quiet time after a static member is back before the next one is bounced. The embedded
    #: broker (Tansu 0.6) can leave a static member cycling JoinGroup/SyncGroup when static
    #: members are replaced back to back; librdkafka members hit the same (docs/testing.md).
    #: None: 10 s on the embedded Tansu broker (where the static phases run only with the
    #: workarounds off), none elsewhere: Apache Kafka replaces static members back to back.
    static_pause_s: float | None = None
    #: A static member still without its partitions after this long gets the group nudged:
    #: every worker calls ``enforce_rebalance`` (KIP-568). Needed on Tansu only (docs/testing.md).
    nudge_after_s: float = 10.0
    #: The same for a group that has not settled after a dynamic bounce. Once in four runs on
    #: Tansu a cooperative follow-up rebalance never came (not diagnosed yet; run with
    #: STREAMTASKS_DEMO_LOGS=dir to keep the workers' logs). Nudges are counted in the report.
    dynamic_nudge_after_s: float = 30.0
    #: Right after a static member is stopped, every other worker is nudged (and must confirm)
    #: so that each has sent the broker its current subscription before the stopped member's
    #: replacement joins. On Tansu a replaced static *leader* assigns at once from the
    #: subscriptions the broker stored at each member's last JoinGroup, without the others
    #: rejoining; a member that gained partitions since then would have them handed out again
    #: (docs/testing.md, "a replaced static member that was the group leader"). Counted in the
    #: report's nudges.
    refresh_before_static_restart: bool = True
    refresh_timeout_s: float = 10.0
    #: Whether the Tansu-only workarounds above (nudges, the refresh before a static restart,
    #: the workers' missed-generation rule off: docs/testing.md, "generation gaps") run, and
    #: the static phases are skipped. None: only on the embedded Tansu broker. On
    #: Apache Kafka (embedded or ``--bootstrap-servers``) the demo runs every phase with none.
    tansu_workarounds: bool | None = None
