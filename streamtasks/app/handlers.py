"""What the app does with a record it cannot handle: Kafka Streams' three exception handlers and
its dead-letter topic.

* ``deserialization_exception_handler`` (KIP-161): a source serde could not read an input
  record's key or value;
* ``processing_exception_handler`` (KIP-1033): the processor raised on a record;
* ``production_exception_handler`` (KIP-210): the broker refused an output record (a record
  too large for the topic, say).

Each handler is ``handler(context, exception) -> HandlerResponse``: ``CONTINUE`` skips the record
(its input offset is committed as if it had been processed), ``FAIL`` stops the app with a
:class:`~streamtasks.errors.ProcessingError` and nothing is committed past the record. They are
configured by name, ``"log_and_continue"`` or ``"log_and_fail"`` (the default for all three, as
in Kafka Streams), or as a callable. A handler that raises counts as ``FAIL``.

With ``errors.dead.letter.queue.topic.name`` set (KIP-1034), the built-in handlers, CONTINUE and
FAIL alike, also write the input record to that topic: its key and value bytes as they arrived,
its timestamp, its headers, and six headers naming the error (:data:`DLQ_HEADERS`). A callable
handler decides for itself with :attr:`ErrorContext.dead_letter` (what it returns as
``HandlerResult(response, dead_letter=True)``).
"""

from __future__ import annotations

import enum
import logging
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from topology.ids import TaskId

__all__ = [
    "DLQ_EXCEPTION",
    "DLQ_HEADERS",
    "DLQ_MESSAGE",
    "DLQ_OFFSET",
    "DLQ_PARTITION",
    "DLQ_STACKTRACE",
    "DLQ_TOPIC",
    "HANDLER_NAMES",
    "ErrorContext",
    "ErrorHandler",
    "ErrorHandling",
    "HandlerResponse",
    "HandlerResult",
    "Headers",
    "Stage",
    "dead_letter_headers",
    "decide",
    "log_and_continue",
    "log_and_fail",
    "resolve_handler",
]

log = logging.getLogger("streamtasks.app.errors")

#: Record headers, as aiokafka hands them out: (name, bytes) pairs in order.
Headers = tuple[tuple[str, bytes], ...]
#: Which handler an error reached.
Stage = Literal["deserialization", "processing", "production"]

# KIP-1034's header names (Kafka Streams' ExceptionHandlerUtils); the values are UTF-8 text.
DLQ_EXCEPTION = "__streams.errors.exception"
DLQ_MESSAGE = "__streams.errors.message"
DLQ_STACKTRACE = "__streams.errors.stacktrace"
DLQ_TOPIC = "__streams.errors.topic"
DLQ_PARTITION = "__streams.errors.partition"
DLQ_OFFSET = "__streams.errors.offset"
DLQ_HEADERS = (DLQ_EXCEPTION, DLQ_MESSAGE, DLQ_STACKTRACE, DLQ_TOPIC, DLQ_PARTITION, DLQ_OFFSET)


class HandlerResponse(enum.Enum):
    """What a handler decided (Kafka Streams' ``CONTINUE`` / ``FAIL``)."""

    CONTINUE = "continue"
    FAIL = "fail"


@dataclass(frozen=True, slots=True, kw_only=True)
class HandlerResult:
    """A handler's answer with what Kafka Streams 4.x's ``Response`` adds: whether to write the
    input record to the dead-letter topic (ignored when none is configured)."""

    response: HandlerResponse
    dead_letter: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorContext:
    """The input record an error is about (Kafka Streams' ``ErrorHandlerContext``): its source
    topic, partition, offset, timestamp and headers, and its key and value bytes as they arrived.
    For a production error, ``output_topic`` names the topic the refused record was for."""

    stage: Stage
    #: The task of the input record (None: a production error whose task was closed since).
    task: TaskId | None
    topic: str
    partition: int
    offset: int
    timestamp: int
    headers: Headers
    key: bytes | None
    value: bytes | None
    output_topic: str | None = None
    #: Whether a dead-letter topic is configured (a built-in handler then writes to it).
    dead_letter: bool = False

    @classmethod
    def of(
        cls,
        stage: Stage,
        task: TaskId | None,
        record: Any,
        dead_letter_topic: str | None,
        output_topic: str | None = None,
    ) -> ErrorContext:
        """The context of the input ``record`` (an aiokafka ``ConsumerRecord``, bytes as they
        arrived)."""
        return cls(
            stage=stage,
            task=task,
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            timestamp=record.timestamp,
            headers=tuple(record.headers) if record.headers else (),
            key=record.key,
            value=record.value,
            output_topic=output_topic,
            dead_letter=dead_letter_topic is not None,
        )

    def where(self) -> str:
        return f"{self.topic}-{self.partition}@{self.offset} (task {self.task})"


#: A handler: ``handler(context, exception)`` returns a response (or a result naming it).
ErrorHandler = Callable[[ErrorContext, BaseException], HandlerResponse | HandlerResult]


def _describe(context: ErrorContext, exc: BaseException) -> str:
    target = f" to {context.output_topic}" if context.output_topic else ""
    return f"{context.stage} error on {context.where()}{target}: {type(exc).__name__}: {exc}"


def log_and_continue(context: ErrorContext, exc: BaseException) -> HandlerResult:
    """Log the error and skip the record (dead-lettered when a topic is configured)."""
    log.warning("skipping the record: %s", _describe(context, exc))
    return HandlerResult(response=HandlerResponse.CONTINUE, dead_letter=context.dead_letter)


def log_and_fail(context: ErrorContext, exc: BaseException) -> HandlerResult:
    """Log the error and stop the app (the record is dead-lettered first when a topic is set)."""
    log.error("stopping the app: %s", _describe(context, exc))
    return HandlerResult(response=HandlerResponse.FAIL, dead_letter=context.dead_letter)


#: The handlers configurable by name.
HANDLER_NAMES: dict[str, ErrorHandler] = {
    "log_and_continue": log_and_continue,
    "log_and_fail": log_and_fail,
}


def resolve_handler(spec: str | ErrorHandler) -> ErrorHandler:
    """A handler from its name (:data:`HANDLER_NAMES`) or itself."""
    if isinstance(spec, str):
        return HANDLER_NAMES[spec]
    return spec


def decide(handler: ErrorHandler, context: ErrorContext, exc: BaseException) -> HandlerResult:
    """Run ``handler``; one that raises or answers something else counts as FAIL (logged)."""
    try:
        answer = handler(context, exc)
    except Exception:
        log.exception("the %s exception handler raised; failing", context.stage)
        return HandlerResult(response=HandlerResponse.FAIL)
    if isinstance(answer, HandlerResponse):
        return HandlerResult(response=answer)
    if isinstance(answer, HandlerResult):
        return answer
    log.error("the %s exception handler answered %r, not a HandlerResponse; failing", context.stage, answer)
    return HandlerResult(response=HandlerResponse.FAIL)


def dead_letter_headers(context: ErrorContext, exc: BaseException) -> Headers:
    """The dead-letter record's headers: the input's own, then KIP-1034's six."""
    trace = "".join(traceback.format_exception(exc))
    added: Sequence[tuple[str, str]] = (
        (DLQ_EXCEPTION, f"{type(exc).__module__}.{type(exc).__qualname__}"),
        (DLQ_MESSAGE, str(exc)),
        (DLQ_STACKTRACE, trace),
        (DLQ_TOPIC, context.topic),
        (DLQ_PARTITION, str(context.partition)),
        (DLQ_OFFSET, str(context.offset)),
    )
    return (*context.headers, *((name, text.encode()) for name, text in added))


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorHandling:
    """The three handlers and the dead-letter topic an app runs with (FAIL everywhere and no
    dead-letter topic by default)."""

    deserialization: ErrorHandler = log_and_fail
    processing: ErrorHandler = log_and_fail
    production: ErrorHandler = log_and_fail
    dead_letter_topic: str | None = None
