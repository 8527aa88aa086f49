"""Simulated applications (``Step.app``): the assignors they build, as the App builds them, and
what they make of an assignment."""

from __future__ import annotations

from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic import AssignmentChanged
from streamtasks.protocol.userdata import (
    RUNNING_OFFSET_SUM,
    AssignmentInfo,
    decode_subscription_info,
    encode_assignment_info,
)
from streamtasks.sim.apps import AppLog, FaustAppSpec, SimApp, StreamsAppSpec, build_app
from streamtasks.streams.faust_protocol import faust_leader_topic
from streamtasks.streams.wiring import EagerStreamsPartitionAssignor
from topology import TopologyBuilder
from topology.ids import TaskId, TopicPartition
from topology.model import Topology


def _topology() -> Topology:
    builder = TopologyBuilder("app")
    builder.stream("in").store("counts")
    return builder.build()


def _build(spec: StreamsAppSpec | FaustAppSpec, name: str = "m1", incarnation: int = 0) -> SimApp:
    return build_app(
        spec, name=name, incarnation=incarnation, partitions_per_topic={"in": 4}, now_ms=lambda: 0
    )


def _process_id(app: SimApp) -> object:
    assert app.streams is not None
    data = app.streams.subscription_user_data(topics=("in",), previous=(), generation=None)
    return decode_subscription_info(data).process_id


def test_an_app_upgrading_from_0_2_is_eager_on_userdata_v2() -> None:
    app = _build(StreamsAppSpec(topology=_topology(), upgrade_from="0.2"))
    assert [type(a) for a in app.assignors] == [EagerStreamsPartitionAssignor]
    assert app.assignors[0].supported_protocols() == (RebalanceProtocol.EAGER,)
    assert app.userdata_version == 2
    assert app.topics == ("in",)


def test_an_emulated_0_3_speaks_v2_only_and_the_current_release_v3() -> None:
    old = _build(StreamsAppSpec(topology=_topology(), emulate_release="0.3"))
    assert old.streams is not None
    assert old.streams.latest_version == 2
    assert RebalanceProtocol.COOPERATIVE in old.assignors[0].supported_protocols()
    new = _build(StreamsAppSpec(topology=_topology()))
    assert new.userdata_version == 3


def test_upgrade_from_faust_offers_faust_first_on_faust_topics() -> None:
    app = _build(StreamsAppSpec(topology=_topology(), upgrade_from="faust"))
    assert [a.name for a in app.assignors] == ["faust", "streamtasks"]
    assert faust_leader_topic("app") in app.topics
    assert "app-counts-changelog" in app.topics
    faust = _build(FaustAppSpec(topology=_topology()))
    assert [a.name for a in faust.assignors] == ["faust"]
    assert faust.userdata_version is None


def test_the_process_id_is_the_names_across_incarnations() -> None:
    spec = StreamsAppSpec(topology=_topology())
    assert _process_id(_build(spec, "m1", 0)) == _process_id(_build(spec, "m1", 3))
    assert _process_id(_build(spec, "m1", 0)) != _process_id(_build(spec, "m2", 0))


def test_owned_source_partitions_are_reported_running() -> None:
    app = _build(StreamsAppSpec(topology=_topology()))
    app.on_assignment(
        AssignmentChanged(generation=1, owned=(TopicPartition("in", 2),)), protocol="streamtasks"
    )
    assert app.task_offset_sums() == {TaskId(0, 2): RUNNING_OFFSET_SUM}


def test_a_built_app_reads_its_assignments_through_its_assignors_hook() -> None:
    """The streams assignor is set after the app exists (it reads the app's offset sums): the
    hook must still reach it, classic (its protocol's name) and KIP-848 (no name) alike."""
    info = AssignmentInfo(standby_tasks=frozenset({TaskId(0, 1)}), version=3, latest_supported_version=3)
    for protocol in ("streamtasks", None):
        app = _build(StreamsAppSpec(topology=_topology()))
        change = AssignmentChanged(
            generation=2, owned=(TopicPartition("in", 0),), user_data=encode_assignment_info(info)
        )
        assert app.on_assignment(change, protocol=protocol) is None
        assert app.problems == []
        assert app.assignment_version == 3
        assert app.standbys == frozenset({TaskId(0, 1)})
        assert app.outcome("m1", protocol).assignment_version == 3


def test_an_unreadable_faust_assignment_is_a_problem() -> None:
    app = _build(FaustAppSpec(topology=_topology()))
    change = AssignmentChanged(generation=4, owned=(), user_data=b"\x00\x01not faust")
    assert app.on_assignment(change, protocol="faust") is None
    assert len(app.problems) == 1
    assert "generation 4" in app.problems[0]


def test_the_log_keeps_two_protocols_of_one_generation_visible() -> None:
    log = AppLog()
    log.assigned(3, "faust", "faust")
    log.assigned(3, "streamtasks", "streams")
    log.assigned(3, "faust", "streams")
    log.assigned(-1, "faust", "faust")  # no generation: not logged
    (row,) = log.rows()
    assert row.generation == 3
    assert row.protocol == "faust+streamtasks"
    assert row.kinds == frozenset({"faust", "streams"})
