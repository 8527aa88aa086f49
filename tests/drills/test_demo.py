"""The demo's subscription refresh before a static member's replacement joins: every running
worker is nudged until its ``enforce_rebalance`` took effect (docs/testing.md, replaced static
leader). Workers are stand-ins that answer a nudge with the JSON event a worker process would
print; the demo's own event handling (``_Worker._apply``) records it."""

from __future__ import annotations

import asyncio
import io

from streamtasks.drills.demo import Demo, DemoOptions, _State, _Worker
from streamtasks.drills.ledger import OwnershipLedger
from streamtasks.drills.worker import make_consumer, parse_args
from streamtasks.membership.classic import ClassicMember
from streamtasks.runtime.driver import monotonic_ms
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
    demo.state = _State(ledger=OwnershipLedger([TopicPartition("t", 0)], monotonic_ms()))
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
