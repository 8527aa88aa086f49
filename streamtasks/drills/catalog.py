"""The rolling-upgrade drills ``streamtasks drill`` knows, as data.

A drill starts a group of workers on one release and moves every worker, one at a time, through
each later stage (a *bounce* per stage). Workers are processes of one of two kinds:

* ``consumer``: :mod:`streamtasks.drills.worker`, a plain streamtasks ``Consumer`` whose release
  is its ordered assignor list (``--assignor a,b``: the JoinGroup protocols it offers);
* ``app``: :mod:`streamtasks.drills.stateful_worker`, a ``streamtasks.App`` (per-key count and
  latest value, one standby) whose release is its wire mode (``--upgrade-from R``, or
  ``--emulate-release R``);
* ``faust``: :mod:`streamtasks.drills.faust_worker`, a faust-streaming app counting per key in a
  table (the ``faust-to-streamtasks`` drill's start; its App stages run
  :func:`~streamtasks.drills.stateful_app.faust_counts_app`, the same table in faust's formats);
* ``mixed``: Kafka Streams' Java word count and Apps with its topology in one streams group
  (:mod:`streamtasks.drills.mixed_streams`).

A consumer-group drill may also take one *peer*: a kafka-python or confluent-kafka consumer
(:mod:`streamtasks.drills.peer_worker`) in the same group, on the stage's ``peer_args``, bounced
after the streamtasks workers in each bounce.

**Emulating an older release** (``userdata-upgrade``): a member of release R is emulated by the
current code with ``upgrade_from=R``, which pins what R put on the wire: its userdata version
(the ``SubscriptionInfo`` it sends) and its rebalance protocol (EAGER before 0.3). What it does
not pin is the leader's reading limit: an emulated 0.2 leader still decodes userdata v3 and
still advertises ``latest_supported_version`` 3. The two-bounce path is exercised faithfully
(old wire, then the mixed group, then the new wire); an old leader meeting a newer member is
not: that is the one-bounce version-probing path, ``userdata-probing``, whose old workers run
with ``emulate_release=R`` instead, which pins the reading limit too: an emulated 0.3 member
writes, reads and advertises userdata v2 only, as leader and as member, so a 0.4 member's v3
subscription is a *future* one to it (header and process id only) and it answers at v2.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.errors import ConfigError

__all__ = ["DRILLS", "DrillSpec", "Stage", "get_drill"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    """A release the workers run: ``label`` for the report, ``args`` for the worker process."""

    label: str
    args: tuple[str, ...]
    #: The worker kind for this stage (None: the drill's).
    worker: str | None = None
    #: A peer worker's arguments on this stage (consumer drills that take a peer).
    peer_args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DrillSpec:
    name: str
    summary: str
    #: ``consumer`` or ``app`` (the module docstring).
    worker: str = "consumer"
    #: Stage 0 is what the group starts on; each later stage is one rolling bounce.
    stages: tuple[Stage, ...] = ()
    available: bool = True
    #: Why the drill cannot run here yet (when not available).
    unavailable: str = ""
    #: App drills: the userdata version every worker must subscribe with at the end (None: not
    #: checked). A worker ending on another one is a problem of the drill.
    final_userdata_version: int | None = None
    #: A broker fault drill (:mod:`streamtasks.drills.faults`): one release (``--protocol``),
    #: on a three-broker cluster whose brokers the drill kills, stops or pauses.
    fault: bool = False

    @property
    def bounces(self) -> tuple[Stage, ...]:
        return self.stages[1:]


DRILLS: tuple[DrillSpec, ...] = (
    DrillSpec(
        name="eager-to-cooperative",
        summary="KIP-429 for a plain consumer group: eager range -> [cooperative_sticky, range] -> "
        "cooperative_sticky, two rolling bounces",
        worker="consumer",
        stages=(
            # A peer library cannot offer both (peer_worker): range, then cooperative-sticky from
            # its bounce in the first round on, when every other member already offers both.
            Stage(label="eager (range)", args=("--assignor", "range"), peer_args=("--assignor", "range")),
            Stage(
                label="both: cooperative_sticky, range",
                args=("--assignor", "cooperative_sticky,range"),
                peer_args=("--assignor", "cooperative-sticky"),
            ),
            Stage(
                label="cooperative_sticky only",
                args=("--assignor", "cooperative_sticky"),
                peer_args=("--assignor", "cooperative-sticky"),
            ),
        ),
    ),
    DrillSpec(
        name="userdata-upgrade",
        summary="App workers from release 0.2 (userdata v2, eager; emulated) to 0.4 (v3, cooperative) "
        "by the two-bounce upgrade_from procedure",
        worker="app",
        stages=(
            Stage(label="0.2 (emulated: userdata v2, eager)", args=("--upgrade-from", "0.2")),
            Stage(label="0.4 with upgrade_from=0.2", args=("--upgrade-from", "0.2")),
            Stage(label="0.4 (userdata v3, cooperative)", args=()),
        ),
    ),
    DrillSpec(
        name="userdata-probing",
        summary="App workers from release 0.3 (userdata v2 only, cooperative; emulated) to 0.4 in one "
        "bounce: each new member is answered at v2 by the old leader and downgrades itself, and "
        "version probing moves the group to v3 once the last old member is gone",
        worker="app",
        stages=(
            Stage(
                label="0.3 (emulated: userdata v2 is its latest, cooperative)",
                args=("--emulate-release", "0.3"),
            ),
            Stage(label="0.4 (userdata v3, no upgrade_from)", args=()),
        ),
        final_userdata_version=3,
    ),
    DrillSpec(
        name="faust-to-streamtasks",
        summary="faust-streaming workers (a table with a standby) replaced one by one by App workers with "
        "upgrade_from='faust', then a second bounce drops faust's protocol; the table carries over",
        worker="app",
        stages=(
            Stage(label="faust-streaming workers", args=(), worker="faust"),
            Stage(
                label="App with upgrade_from='faust'", args=("--faust-compatible", "--upgrade-from", "faust")
            ),
            Stage(label="App, streamtasks protocol only", args=("--faust-compatible",)),
        ),
    ),
    DrillSpec(
        name="classic-to-consumer",
        summary="KIP-848 online migration (on Apache Kafka, or with --coordinator on streamtasks "
        "coordinator; --simulate: on streamtasks coordinator in the simulator): every member bounced "
        "from the classic protocol (cooperative_sticky) to group.protocol=consumer (the server-side "
        "uniform assignor), then back",
        worker="consumer",
        stages=(
            Stage(label="classic (cooperative_sticky)", args=("--assignor", "cooperative_sticky")),
            Stage(
                label="consumer (KIP-848, uniform)",
                args=("--group-protocol", "consumer", "--remote-assignor", "uniform"),
            ),
            Stage(label="classic again (the downgrade)", args=("--assignor", "cooperative_sticky")),
        ),
    ),
)

#: The broker fault drills: stage 0 is the default ``--protocol`` (classic cooperative).
_CLASSIC = Stage(label="classic (cooperative_sticky)", args=("--assignor", "cooperative_sticky"))
DRILLS += (
    DrillSpec(
        name="broker-crash",
        summary="3-broker cluster: kill -9 the group coordinator's broker mid-stream, then again during a "
        "member's bounce; each comes back after 10 s",
        stages=(_CLASSIC,),
        fault=True,
    ),
    DrillSpec(
        name="leader-crash",
        summary="3-broker cluster: kill -9 the broker leading most input and changelog partitions; back "
        "after 10 s",
        stages=(_CLASSIC,),
        fault=True,
    ),
    DrillSpec(
        name="broker-rolling-restart",
        summary="3-broker cluster: every broker stopped (controlled shutdown) and started in turn, a member "
        "bounced while each is down",
        stages=(_CLASSIC,),
        fault=True,
    ),
    DrillSpec(
        name="broker-hang",
        summary="3-broker cluster: SIGSTOP the group coordinator's broker for longer than the session "
        "timeout, then SIGCONT",
        stages=(_CLASSIC,),
        fault=True,
    ),
)

#: Kafka Streams' own Java workers (kafka_streams_peer) and streamtasks Apps with the same
#: word-count topology in one KIP-1071 streams group (worker kind ``mixed``: run by
#: drills/mixed_command.py, scripts in drills/mixed_streams.py); Apache Kafka 4.2+ and Java.
_KAFKA_STREAMS = Stage(label="Kafka Streams 4.4 word count (java/streams)", args=(), worker="kafka-streams")
_STREAMS_APP = Stage(label="App word count, group_protocol='streams'", args=(), worker="app")
DRILLS += (
    DrillSpec(
        name="kafka-streams-to-streamtasks",
        summary="Kafka Streams 4.4 word-count workers (group.protocol=streams) replaced one by one by "
        "streamtasks Apps with the same topology in the same streams group; counts carry over",
        worker="mixed",
        stages=(_KAFKA_STREAMS, _STREAMS_APP),
    ),
    DrillSpec(
        name="streamtasks-to-kafka-streams",
        summary="the way back: streamtasks Apps in a streams group replaced one by one by Kafka Streams 4.4 "
        "word-count workers",
        worker="mixed",
        stages=(_STREAMS_APP, _KAFKA_STREAMS),
    ),
)

_BY_NAME = {d.name: d for d in DRILLS}


def get_drill(name: str) -> DrillSpec:
    """The drill called ``name``; an unknown name is a :class:`ConfigError` listing the known."""
    drill = _BY_NAME.get(name)
    if drill is None:
        raise ConfigError(f"no drill named {name!r}; known: {', '.join(_BY_NAME)}")
    return drill
