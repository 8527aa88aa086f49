"""What an App accepts per subtopology: a function, a ProcessorSpec with an init hook, or an
object with process (and init) methods; anything else is a ConfigError at construction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamtasks.app import App, ProcessorContext, ProcessorSpec, Record
from streamtasks.app.processor import resolve_processor
from streamtasks.errors import ConfigError
from topology import TopologyBuilder
from topology.model import Topology


def one_step() -> Topology:
    builder = TopologyBuilder("p")
    builder.stream("in").store("s")
    return builder.build()


def process(ctx: ProcessorContext, record: Record) -> None:
    ctx.send("out", key=record.key, value=record.value)


def init(ctx: ProcessorContext) -> None:
    pass


class WithInit:
    def init(self, ctx: ProcessorContext) -> None:
        pass

    def process(self, ctx: ProcessorContext, record: Record) -> None:
        pass


class WithoutInit:
    def process(self, ctx: ProcessorContext, record: Record) -> None:
        pass


def test_each_form_resolves_to_its_process_and_init() -> None:
    assert resolve_processor(0, process) == (process, None)
    assert resolve_processor(0, ProcessorSpec(process=process, init=init)) == (process, init)
    assert resolve_processor(0, ProcessorSpec(process=process)) == (process, None)
    obj = WithInit()
    assert resolve_processor(0, obj) == (obj.process, obj.init)
    plain = WithoutInit()
    assert resolve_processor(0, plain) == (plain.process, None)


@pytest.mark.parametrize("bad", [42, "count", None])
def test_anything_else_is_refused_naming_the_subtopology(bad: Any) -> None:
    with pytest.raises(ConfigError, match="subtopology 3"):
        resolve_processor(3, bad)


def test_an_init_that_is_not_callable_is_refused() -> None:
    class Odd:
        init = 5

        def process(self, ctx: ProcessorContext, record: Record) -> None:
            pass

    with pytest.raises(ConfigError, match="init of subtopology 0"):
        resolve_processor(0, Odd())


def test_the_app_takes_every_form_and_refuses_a_bad_one_before_any_broker(tmp_path: Path) -> None:
    settings: dict[str, Any] = {
        "application_id": "p",
        "bootstrap_servers": "127.0.0.1:1",
        "state_dir": str(tmp_path),
    }
    forms = (process, ProcessorSpec(process=process, init=init), WithInit())
    apps = [App(one_step(), {0: spec}, **settings) for spec in forms]
    assert [app.config.application_id for app in apps] == ["p", "p", "p"]
    with pytest.raises(ConfigError, match="neither a function nor an object"):
        App(one_step(), {0: 42}, **settings)  # type: ignore[dict-item]
