"""The task set's side of the exception handlers (:mod:`streamtasks.app.handlers`): asking the
configured handler about a poison record, queueing its dead-letter record, and counting what
was skipped. :class:`PoisonRecords` decides; the task set sends what it queues with the outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtasks.app.context import Output
from streamtasks.app.handlers import (
    ErrorContext,
    ErrorHandling,
    HandlerResponse,
    Stage,
    dead_letter_headers,
    decide,
)
from streamtasks.errors import ProcessingError
from topology.ids import TaskId

__all__ = ["PoisonRecords"]


class PoisonRecords:
    """Runs the handlers of ``errors``; ``queue`` takes each dead-letter record to send."""

    def __init__(self, errors: ErrorHandling, queue: Callable[[Output], None]) -> None:
        self.errors = errors
        self._queue = queue
        #: Records a handler answered CONTINUE for (skipped inputs, dropped outputs).
        self.dropped = 0
        #: Dead-letter records queued (for the DLQ topic).
        self.dead_lettered = 0

    def input_failed(self, stage: Stage, task: TaskId, record: Any, exc: Exception) -> None:
        """A source serde or the processor raised on the input ``record`` (an aiokafka
        ``ConsumerRecord``): dead-letter it if told to; raise :class:`ProcessingError` on FAIL."""
        handler = self.errors.deserialization if stage == "deserialization" else self.errors.processing
        context = ErrorContext.of(stage, task, record, self.errors.dead_letter_topic)
        decision = decide(handler, context, exc)
        self._dead_letter(decision.dead_letter, context, exc)
        if decision.response is HandlerResponse.FAIL:
            what = "processor" if stage == "processing" else "source serde"
            where = f"{record.topic}-{record.partition}@{record.offset}"
            raise ProcessingError(f"{what} of task {task} failed on {where}: {exc!r}") from exc
        self.dropped += 1

    def punctuation_failed(self, task: TaskId, kind: str, timestamp: int, exc: Exception) -> None:
        """A punctuation callback of ``task`` raised: the processing handler decides (Kafka
        Streams' KIP-1033 rule), told by a context without an input record (topic ``""``,
        partition and offset -1, nothing to dead-letter); raise :class:`ProcessingError` on FAIL."""
        context = ErrorContext(
            stage="processing",
            task=task,
            topic="",
            partition=-1,
            offset=-1,
            timestamp=timestamp,
            headers=(),
            key=None,
            value=None,
        )
        if decide(self.errors.processing, context, exc).response is HandlerResponse.FAIL:
            what = f"a {kind} punctuation of task {task} failed at {timestamp}"
            raise ProcessingError(f"{what}: {exc!r}") from exc
        self.dropped += 1

    def output_refused(self, task: TaskId | None, origin: Any, topic: str, exc: BaseException) -> bool:
        """The broker refused an output to ``topic`` written for the input ``origin`` (None: a
        dead-letter record, or one written outside processing). Returns whether that is fatal."""
        if origin is None or topic == self.errors.dead_letter_topic:
            return True
        context = ErrorContext.of("production", task, origin, self.errors.dead_letter_topic, topic)
        decision = decide(self.errors.production, context, exc)
        self._dead_letter(decision.dead_letter, context, exc)
        if decision.response is HandlerResponse.FAIL:
            return True
        self.dropped += 1
        return False

    def _dead_letter(self, wanted: bool, context: ErrorContext, exc: BaseException) -> None:
        topic = self.errors.dead_letter_topic
        if wanted and topic is not None:
            headers = dead_letter_headers(context, exc)
            self.dead_lettered += 1
            self._queue(
                Output(
                    topic=topic,
                    key=context.key,
                    value=context.value,
                    timestamp=context.timestamp,
                    headers=headers,
                )
            )
