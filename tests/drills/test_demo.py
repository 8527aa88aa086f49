"""The demo's subscription refresh before a static member's replacement joins: every running
worker is nudged until its ``enforce_rebalance`` took effect (docs/testing.md, replaced static
leader). Workers are stand-ins that answer a nudge with the JSON event a worker process would
print; the demo's own event handling (``_Worker._apply``) records it."""

from __future__ import annotations

import asyncio
import io

import pytest

from streamtasks.drills.demo import PROTOCOLS, Demo, DemoOptions, _State, _Worker, require_kip848
from streamtasks.drills.demo_cluster import require_streams_groups
from streamtasks.drills.ledger import OwnershipAudit
from streamtasks.drills.worker import make_consumer, parse_args
from streamtasks.embedded import EmbeddedBroker
from streamtasks.errors import BrokerError
from streamtasks.membership.classic import ClassicMember
from streamtasks.membership.consumer import ConsumerMember
from streamtasks.runtime.member_loop import monotonic_ms
from topology import TopicPartition


class _AnsweringWorker(_Worker):
    """Answers each nudge as a worker process does: ``took`` is False while it is rebalancing."""

    def __init__(self, name: str, state: _State, answers: list[bool]) -> None:
        super().__init__(name, name, state, [])
        self.answers = answers
        self.nudged = 0

    def nudge(self) -> None:
        took = self.answers[min(self.nudged, len(self.answers) - 1)]
        self.nudged += 1
        self._apply({"worker": self.name, "kind": "nudged", "took": took, "t": monotonic_ms()})


def _demo(answers: dict[str, list[bool]], timeout_s: float = 5.0) -> tuple[Demo, io.StringIO]:
    out = io.StringIO()
    demo = Demo(DemoOptions(refresh_timeout_s=timeout_s), out)
    demo.state = _State(ledger=OwnershipAudit([TopicPartition("t", 0)], monotonic_ms()))
    demo.workers = {n: _AnsweringWorker(n, demo.state, a) for n, a in answers.items()}
    return demo, out


def _nudged(demo: Demo) -> dict[str, int]:
    return {n: w.nudged for n, w in demo.workers.items() if isinstance(w, _AnsweringWorker)}


def test_refresh_nudges_only_the_running_members_once_when_every_nudge_takes() -> None:
    demo, out = _demo({"w1": [True], "w2": [True], "w3": [True]})
    asyncio.run(demo._refresh({"w1", "w3"}))
    assert _nudged(demo) == {"w1": 1, "w2": 0, "w3": 1}
    assert demo.nudges == 1
    assert "no confirmed rejoin" not in out.getvalue()


def test_refresh_nudges_again_a_member_that_was_mid_rebalance() -> None:
    demo, out = _demo({"w1": [True], "w2": [False, False, True]})
    asyncio.run(demo._refresh({"w1", "w2"}))
    assert _nudged(demo) == {"w1": 1, "w2": 3}
    assert "no confirmed rejoin" not in out.getvalue()


def test_refresh_gives_up_after_its_timeout_and_says_who_did_not_confirm() -> None:
    demo, out = _demo({"w1": [True], "w2": [False]}, timeout_s=0.6)
    asyncio.run(demo._refresh({"w1", "w2"}))
    assert _nudged(demo)["w2"] >= 2
    assert "no confirmed rejoin from w2; going on" in out.getvalue()


def test_the_demo_worker_turns_the_missed_generation_rule_off_only_when_told() -> None:
    """The demo passes ``--no-lose-on-missed-generation`` on Tansu only (docs/testing.md,
    "generation gaps"); by default a worker keeps Apache Kafka's behaviour."""
    base = ["--bootstrap-servers", "127.0.0.1:9", "--group", "g", "--topic", "t", "--name", "w"]
    for extra, expected in (([], True), (["--no-lose-on-missed-generation"], False)):
        member = make_consumer(parse_args([*base, *extra]), [])._member
        assert isinstance(member, ClassicMember)
        assert member.config.lose_on_missed_generation is expected


def _worker_member(*extra: str) -> object:
    base = ["--bootstrap-servers", "127.0.0.1:9", "--group", "g", "--topic", "t", "--name", "w"]
    return make_consumer(parse_args([*base, *extra]), [])._member


def test_the_demo_worker_runs_each_protocol_the_demo_names() -> None:
    """``--protocol`` → the worker's member: classic with the named assignor; KIP-848 with the
    coordinator's assignor (consumer) or with client-side assignors (consumer-client)."""
    classic = _worker_member(*PROTOCOLS["eager"])
    assert isinstance(classic, ClassicMember)
    assert [a.name for a in classic.config.assignors] == ["sticky"]
    server_side = _worker_member(*PROTOCOLS["consumer"])
    assert isinstance(server_side, ConsumerMember)
    assert server_side.config.server_assignor == "uniform"
    assert server_side.config.client_assignors == ()
    client_side = _worker_member(*PROTOCOLS["consumer-client"])
    assert isinstance(client_side, ConsumerMember)
    assert client_side.config.server_assignor is None
    assert [a.name for a in client_side.config.client_assignors] == ["cooperative-sticky"]


class _NoKip848Cluster(EmbeddedBroker):
    """A cluster whose ApiVersions lacks ConsumerGroupHeartbeat, as Tansu's does (no process)."""

    def __init__(self) -> None:
        pass

    @property
    def bootstrap_servers(self) -> str:
        return "127.0.0.1:9"

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return {0: (0, 11), 18: (0, 4)}


def test_protocol_consumer_is_refused_on_a_cluster_without_consumer_group_heartbeat() -> None:
    with pytest.raises(BrokerError) as refused:
        require_kip848(_NoKip848Cluster())
    message = str(refused.value)
    assert "ConsumerGroupHeartbeat (API key 68" in message
    assert "(Tansu does not)" in message
    assert "--protocol consumer-client" in message


def test_protocol_streams_is_refused_on_a_cluster_without_streams_group_heartbeat() -> None:
    with pytest.raises(BrokerError) as refused:
        require_streams_groups(_NoKip848Cluster())
    message = str(refused.value)
    assert "StreamsGroupHeartbeat (API key 88, KIP-1071) (Tansu does not)" in message
    assert "--broker kafka" in message
    require_streams_groups(_NoKip848Cluster(), served={88})  # served: nothing to refuse
