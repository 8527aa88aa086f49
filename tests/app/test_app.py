"""App construction: what it checks before touching a broker, and what it offers in JoinGroup."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from assignors.partition.hooks import subscription_user_data
from assignors.partition.types import RebalanceProtocol
from streamtasks.app import App, ProcessorContext, Record
from streamtasks.errors import ConfigError, UnknownAssignorError
from streamtasks.membership.classic import MemberConfig
from streamtasks.membership.consumer import ConsumerMember
from streamtasks.protocol.faust_compat import decode_faust_subscription
from streamtasks.protocol.userdata import decode_subscription_info
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
