"""What an App runs per subtopology: a processor function, or one with an ``init`` hook.

A plain function ``fn(ctx, record)`` (sync or async) is enough for a processor without
punctuation. One that schedules punctuations (:mod:`streamtasks.app.punctuation`) gives an
``init(ctx)`` hook too, as Kafka Streams' ``Processor.init``::

    App(topology, {0: split, 1: ProcessorSpec(process=count, init=schedule_emits)}, ...)

or any object with a ``process(ctx, record)`` method and, optionally, an ``init(ctx)`` one (one
object serves every task of its subtopology: keep per-task state in the task's stores).
``init`` runs once each time a task starts running on this process: when it is created active
or recycled to active, after its stores are restored and before its first record or
punctuation. A task that moves to another process runs ``init`` there; its schedules here end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from streamtasks.app.context import ProcessorContext, Record
from streamtasks.errors import ConfigError

__all__ = ["AnyProcessor", "Init", "Processor", "ProcessorObject", "ProcessorSpec", "resolve_processor"]

#: A processor: ``fn(ctx, record)``, sync or async.
Processor = Callable[[ProcessorContext, Record], Awaitable[None] | None]
#: A task's start hook: ``init(ctx)``, sync or async.
Init = Callable[[ProcessorContext], Awaitable[None] | None]


@runtime_checkable
class ProcessorObject(Protocol):
    """A processor written as an object: ``process(ctx, record)`` (``init(ctx)`` optional)."""

    def process(self, ctx: ProcessorContext, record: Record) -> Awaitable[None] | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessorSpec:
    """A processor function with the ``init`` hook that runs when a task starts here."""

    process: Processor
    init: Init | None = None


#: What the processors mapping of an App (or a test driver) may hold per subtopology.
AnyProcessor = Processor | ProcessorSpec | ProcessorObject


def resolve_processor(subtopology: int, spec: Any) -> tuple[Processor, Init | None]:
    """The ``(process, init)`` pair of what was given for ``subtopology``."""
    process = getattr(spec, "process", None)
    if callable(process):
        init = getattr(spec, "init", None)
        if init is not None and not callable(init):
            raise ConfigError(f"the init of subtopology {subtopology}'s processor is not callable: {init!r}")
        return process, init
    if callable(spec):
        return spec, None
    raise ConfigError(
        f"the processor of subtopology {subtopology} is neither a function nor an object with "
        f"a process(ctx, record) method: {spec!r}"
    )
