"""App construction: what it checks before touching a broker, and what it offers in JoinGroup."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from assignors.partition.hooks import subscription_user_data
from assignors.partition.types import RebalanceProtocol
from streamtasks.app import App, ProcessorContext, Record, SubscriptionVersionChanged
from streamtasks.errors import ConfigError, UnknownAssignorError
from streamtasks.membership.classic import AssignmentChanged, MemberConfig
from streamtasks.membership.consumer import ConsumerMember
from streamtasks.protocol.faust_compat import decode_faust_subscription
from streamtasks.protocol.userdata import (
    AssignmentInfo,
    decode_subscription_info,
    encode_assignment_info,
    peek_version,
)
from topology import TopologyBuilder
from topology.model import Topology


def wordcount() -> Topology:
    builder = TopologyBuilder("wc")
    builder.stream("lines").repartition("words").store("counts")
    return builder.build()


def noop(ctx: ProcessorContext, record: Record) -> None:
    return None


def make(tmp_path: Path, **settings: object) -> App:
    return App(
        wordcount(),
        {0: noop, 1: noop},
        application_id="wc",
        bootstrap_servers="127.0.0.1:9",
        state_dir=str(tmp_path),
        **settings,
    )


def joining(app: App) -> bytes:
    """The user data the member offers with the app's assignor in JoinGroup (its hook)."""
    return subscription_user_data(app.assignor, topics=(), previous=(), generation=-1)


def test_processors_must_cover_every_subtopology(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing \[1\]"):
        App(wordcount(), {0: noop}, application_id="wc", bootstrap_servers="h:1", state_dir=str(tmp_path))
    with pytest.raises(ConfigError, match=r"unknown \[7\]"):
        App(
            wordcount(),
            {0: noop, 1: noop, 7: noop},
            application_id="wc",
            bootstrap_servers="h:1",
            state_dir=str(tmp_path),
        )


def test_application_id_must_match_the_topology(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="differs from the topology"):
        App(wordcount(), {0: noop, 1: noop}, application_id="other", bootstrap_servers="h:1")


def test_unknown_task_assignor_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(UnknownAssignorError, match="no_such_assignor"):
        make(tmp_path, task_assignor="no_such_assignor")


def test_the_default_is_cooperative_with_the_latest_userdata(tmp_path: Path) -> None:
    app = make(tmp_path)
    assert max(app.assignor.supported_protocols()) is RebalanceProtocol.COOPERATIVE
    app.process_id = uuid.uuid4()
    info = decode_subscription_info(joining(app))
    assert info.process_id == app.process_id
    assert info.version == 3


@pytest.mark.parametrize(("release", "version"), [("0.1", 1), ("0.2", 2)])
def test_upgrade_from_an_eager_release_stays_eager_with_its_userdata(
    tmp_path: Path, release: str, version: int
) -> None:
    app = make(tmp_path, upgrade_from=release)
    assert app.assignor.supported_protocols() == (RebalanceProtocol.EAGER,)
    app.process_id = uuid.uuid4()
    assert decode_subscription_info(joining(app)).version == version


def test_upgrade_from_faust_offers_faust_first_and_subscribes_faust_topics(tmp_path: Path) -> None:
    app = make(tmp_path, upgrade_from="faust", num_standby_replicas=1)
    assert app.faust is not None
    member = app.consumer._member
    assert isinstance(member.config, MemberConfig)
    assert [a.name for a in member.config.assignors] == ["faust", "streamtasks"]
    assert member.config.topics == (
        "lines",
        "wc-__assignor-__leader",
        "wc-counts-changelog",
        "wc-words-repartition",
    )
    assert app.assignor.supported_protocols() == (RebalanceProtocol.EAGER,)
    data = app.faust.join_metadata(member.config.topics, ())
    assert decode_faust_subscription(data).metadata.url.startswith("streamtasks://")


def test_under_kip848_the_app_assignor_runs_client_side(tmp_path: Path) -> None:
    """``group_protocol="consumer"``: a KIP-848 member whose only (client-side) assignor is the
    app's streams assignor."""
    app = make(tmp_path, group_protocol="consumer")
    member = app.consumer._member
    assert isinstance(member, ConsumerMember)
    assert member.config.client_assignors == (app.assignor,)
    assert member.config.server_assignor is None


# -- version probing: an emulated older release, and the member side in the app --------------------


@pytest.mark.parametrize(
    ("release", "version", "protocols"),
    [
        ("0.3", 2, (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)),
        ("0.1", 1, (RebalanceProtocol.EAGER,)),
    ],
)
def test_an_emulated_release_pins_its_latest_version_and_protocol(
    tmp_path: Path, release: str, version: int, protocols: tuple[RebalanceProtocol, ...]
) -> None:
    app = make(tmp_path, emulate_release=release)
    assert (app.assignor.latest_version, app.assignor.used_version) == (version, version)
    assert app.assignor.supported_protocols() == protocols
    app.process_id = uuid.uuid4()
    assert peek_version(joining(app)) == (version, version)  # upgrade_from would advertise v3


def test_an_unknown_emulated_release_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no streamtasks release '0\.9'"):
        make(tmp_path, emulate_release="0.9")


def assign(app: App, version: int, common: int, user_data: bytes | None = None) -> None:
    """The member applied an assignment at ``version`` saying the group speaks ``common``."""
    if user_data is None:
        user_data = encode_assignment_info(AssignmentInfo(version=version, latest_supported_version=common))
    asyncio.run(app.on_assignment(AssignmentChanged(generation=4, owned=(), user_data=user_data)))


def joined(tmp_path: Path, requests: list[str], monkeypatch: pytest.MonkeyPatch, **settings: object) -> App:
    """An app whose member has sent one subscription; rebalances it asks for go to ``requests``
    (and to the real member)."""
    app = make(tmp_path, **settings)
    app.process_id = uuid.uuid4()
    joining(app)
    enforce = app.consumer.enforce_rebalance

    def spy(reason: str = "") -> bool:
        requests.append(reason)
        return enforce(reason)

    monkeypatch.setattr(app.consumer, "enforce_rebalance", spy)
    return app


def changes(app: App) -> list[SubscriptionVersionChanged]:
    return [e for e in app.events if isinstance(e, SubscriptionVersionChanged)]


def test_an_older_groups_assignment_moves_the_app_down_and_it_rejoins_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests: list[str] = []
    app = joined(tmp_path, requests, monkeypatch)
    assign(app, 2, 2)
    assert len(requests) == 1
    assert "sent userdata v3, got a v2 assignment" in requests[0]
    (change,) = changes(app)
    assert (change.from_version, change.to_version) == (3, 2)
    assert (change.assignment_version, change.group_version) == (2, 2)
    assert change.rebalance_requested
    assert peek_version(joining(app)) == (2, 3)
    assign(app, 2, 2)  # the answer to that subscription: nothing more to do
    assert len(requests) == 1


def test_the_app_moves_up_when_the_old_members_are_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests: list[str] = []
    app = joined(tmp_path, requests, monkeypatch, upgrade_from="0.3")
    assign(app, 2, 3)
    assert len(requests) == 1
    assert [(c.from_version, c.to_version) for c in changes(app)] == [(2, 3)]
    assert peek_version(joining(app)) == (3, 3)


def test_a_bad_assignment_version_neither_stops_the_app_nor_changes_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests: list[str] = []
    app = joined(tmp_path, requests, monkeypatch, upgrade_from="0.3")
    future = encode_assignment_info(AssignmentInfo(version=3, latest_supported_version=3))
    assign(app, 3, 3, user_data=b"\x00\x00\x00\x04\x00\x00\x00\x04" + future[8:])  # unknown v4
    assign(app, 3, 3)  # newer than the v2 subscription it answers
    assert (requests, changes(app), app.assignor.used_version) == ([], [], 2)


def test_under_kip848_the_app_does_not_follow_userdata_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests: list[str] = []
    app = joined(tmp_path, requests, monkeypatch, group_protocol="consumer")
    assign(app, 2, 2)
    assert (requests, changes(app), app.assignor.used_version) == ([], [], 3)


class _Eos:
    """The app's transactions, as ``App.send_pending`` uses them: counts the begins."""

    def __init__(self) -> None:
        self.begins = 0

    async def begin(self) -> None:
        self.begins += 1


def test_flush_sends_dead_letters_queued_while_flushing_through_send_pending(tmp_path: Path) -> None:
    """A dead letter the production handler queues during the producer flush goes out through
    ``App.send_pending`` (exactly-once: inside a transaction it begins), like every other send."""
    from streamtasks.app.context import Output
    from tests.app.test_tasks import _Producer

    app = make(tmp_path, processing_guarantee="exactly_once_v2")
    eos = _Eos()
    app.eos = eos  # type: ignore[assignment]

    class Producer(_Producer):
        async def flush(self) -> None:
            await super().flush()
            if not self.sent:  # the first flush: an output was refused, its dead letter queued
                app.tasks._outbox.append((Output(topic="dlq", key=b"k", value=b"v"), None))

    producer = Producer()
    app.producer = producer
    asyncio.run(app.flush())
    assert [topic for topic, *_ in producer.sent] == ["dlq"]
    assert eos.begins == 2  # the resend went through App.send_pending too
    assert not app.tasks.has_unsent()


class FakeTransactions:
    def __init__(self) -> None:
        self.aborts = 0

    async def abort(self) -> None:
        self.aborts += 1


def test_a_retriable_failure_while_stopping_closes_the_tasks_dirty_and_is_not_raised(tmp_path: Path) -> None:
    """A commit answered ILLEGAL_GENERATION (TaskMigratedError) while the app stops: the open
    transaction aborts and the active tasks close dirty, the stop goes on (it used to end
    ``run()`` with the error); a fatal one still raises."""
    from streamtasks.errors import ProcessingError, TaskMigratedError

    app = make(tmp_path, processing_guarantee="exactly_once_v2")
    eos = FakeTransactions()
    app.eos = eos  # type: ignore[assignment]
    closed: list[str] = []
    app.tasks.close_actives_dirty = lambda: closed.append("dirty")  # type: ignore[method-assign]
    app._closed = True
    asyncio.run(app._recover(TaskMigratedError("commit rejected: ILLEGAL_GENERATION")))
    assert (eos.aborts, closed) == (1, ["dirty"])
    with pytest.raises(ProcessingError, match="boom"):
        asyncio.run(app._recover(ProcessingError("boom")))


def test_a_commit_waits_half_a_session_for_acknowledgements_then_frees_the_lock(tmp_path: Path) -> None:
    """A partition leader that hangs keeps its acknowledgements (and the producer's flush) for
    up to the request timeout: the periodic commit gives up after half a session timeout with
    CommitFailedError (skipped, nothing checkpointed), and the app lock is free again, so the
    rebalance that gives the partitions up (the coordinator hangs too) is not held behind it."""
    from streamtasks.errors import CommitFailedError
    from tests.app.test_tasks import _Producer

    app = make(tmp_path, session_timeout_ms=1_000, heartbeat_interval_ms=100)
    assert app._flush_bound_ms == 500
    checkpoints: list[str] = []
    app.tasks.checkpoint_all = lambda: checkpoints.append("checkpoint")  # type: ignore[method-assign]

    class Hung(_Producer):
        async def flush(self) -> None:
            await asyncio.sleep(3600)

    app.producer = Hung()

    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(CommitFailedError, match="not acknowledged within 500 ms"):
            await app.commit()
        assert not app.lock.locked()
        return loop.time() - start

    took = asyncio.run(main())
    assert 0.4 < took < 3.0
    assert checkpoints == []
