"""What a processor's context refuses: a store or a repartition topic its subtopology does not
declare, each with the error that says so."""

from __future__ import annotations

import pytest

import streamtasks
from streamtasks import StreamTasksError, UndeclaredTopicError, UnknownStoreError
from streamtasks.app.context import Output, ProcessorContext
from topology import TaskId


def context(repartition: dict[str, str], out: list[Output]) -> ProcessorContext:
    return ProcessorContext(TaskId(0, 3), {}, repartition, out.append)


def test_forward_to_a_declared_topic_writes_its_repartition_topic() -> None:
    out: list[Output] = []
    context({"words": "app-words-repartition"}, out).forward("words", key=b"k", value=b"1")
    assert out == [Output(topic="app-words-repartition", key=b"k", value=b"1")]


def test_forward_to_an_undeclared_topic_names_it_and_the_declared_ones() -> None:
    out: list[Output] = []
    ctx = context({"words": "app-words-repartition", "pairs": "app-pairs-repartition"}, out)
    with pytest.raises(UndeclaredTopicError) as info:
        ctx.forward("wrods", key=b"k", value=b"1")
    message = str(info.value)
    assert "task 0_3 forwards to repartition topic 'wrods'" in message
    assert "does not declare (it declares: 'pairs', 'words')" in message
    assert "ctx.send" in message
    assert out == []
    assert isinstance(info.value, StreamTasksError)
    assert isinstance(info.value, UnknownStoreError)  # what callers caught before it had a name


def test_forward_from_a_subtopology_that_declares_none() -> None:
    with pytest.raises(UndeclaredTopicError, match=r"\(it declares: none\)"):
        context({}, []).forward("words", key=None, value=None)


def test_the_error_is_exported_from_the_package() -> None:
    assert streamtasks.UndeclaredTopicError is UndeclaredTopicError
    assert "UndeclaredTopicError" in streamtasks.__all__
