"""The exception handlers as values: names, answers, and the dead-letter headers (KIP-1034)."""

from __future__ import annotations

import pytest

from streamtasks.app.config import make_app_config
from streamtasks.app.handlers import (
    DLQ_HEADERS,
    ErrorContext,
    HandlerResponse,
    HandlerResult,
    dead_letter_headers,
    decide,
    log_and_continue,
    log_and_fail,
    resolve_handler,
)
from streamtasks.errors import ConfigError
from tests.ids import task as t


def context(dead_letter: bool = True) -> ErrorContext:
    return ErrorContext(
        stage="processing",
        task=t("0_1"),
        topic="in",
        partition=1,
        offset=42,
        timestamp=1_700,
        headers=(("trace", b"abc"),),
        key=b"k",
        value=b"\xff",
        dead_letter=dead_letter,
    )


def failing() -> ValueError:
    try:
        raise ValueError("bad value")
    except ValueError as exc:
        return exc


def test_the_built_in_handlers_answer_and_ask_for_the_dead_letter_topic_when_one_is_set() -> None:
    assert log_and_continue(context(), failing()) == HandlerResult(
        response=HandlerResponse.CONTINUE, dead_letter=True
    )
    assert log_and_fail(context(dead_letter=False), failing()) == HandlerResult(
        response=HandlerResponse.FAIL, dead_letter=False
    )
    assert resolve_handler("log_and_continue") is log_and_continue
    assert resolve_handler(log_and_fail) is log_and_fail


def test_a_handler_that_raises_or_answers_nonsense_fails() -> None:
    def raises(ctx: ErrorContext, exc: BaseException) -> HandlerResponse:
        raise RuntimeError("handler bug")

    def nonsense(ctx: ErrorContext, exc: BaseException) -> HandlerResponse:
        return "continue"  # type: ignore[return-value]

    def plain(ctx: ErrorContext, exc: BaseException) -> HandlerResponse:
        return HandlerResponse.CONTINUE

    assert decide(raises, context(), failing()).response is HandlerResponse.FAIL
    assert decide(nonsense, context(), failing()).response is HandlerResponse.FAIL
    assert decide(plain, context(), failing()) == HandlerResult(response=HandlerResponse.CONTINUE)


def test_dead_letter_headers_keep_the_inputs_and_name_the_error_as_kip_1034_does() -> None:
    headers = dead_letter_headers(context(), failing())
    assert headers[0] == ("trace", b"abc")
    assert tuple(name for name, _ in headers[1:]) == DLQ_HEADERS
    values = {name: value.decode() for name, value in headers[1:]}
    assert values["__streams.errors.exception"] == "builtins.ValueError"
    assert values["__streams.errors.message"] == "bad value"
    assert "Traceback" in values["__streams.errors.stacktrace"]
    assert 'raise ValueError("bad value")' in values["__streams.errors.stacktrace"]
    assert (values["__streams.errors.topic"], values["__streams.errors.partition"]) == ("in", "1")
    assert values["__streams.errors.offset"] == "42"


def test_handlers_are_configured_by_name_or_callable_and_fail_by_default() -> None:
    base = {"application_id": "a", "bootstrap_servers": "h:9092"}
    default = make_app_config(base)
    assert default.deserialization_exception_handler == "log_and_fail"
    assert default.processing_exception_handler == "log_and_fail"
    assert default.production_exception_handler == "log_and_fail"
    assert default.dead_letter_queue_topic is None
    named = make_app_config(
        base,
        **{
            "processing.exception.handler": "log_and_continue",
            "errors.dead.letter.queue.topic.name": "dlq",
        },
    )
    assert (named.processing_exception_handler, named.dead_letter_queue_topic) == ("log_and_continue", "dlq")
    custom = make_app_config(base, production_exception_handler=log_and_continue)
    assert custom.production_exception_handler is log_and_continue
    with pytest.raises(ConfigError, match="unknown handler 'log_and_ignore'"):
        make_app_config(base, deserialization_exception_handler="log_and_ignore")
