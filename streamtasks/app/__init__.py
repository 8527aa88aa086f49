"""Stateful stream applications: tasks with local state, changelogs, standbys and warm-ups.

See :class:`streamtasks.app.App` and ``docs/app.md``.
"""

from streamtasks.app.app import App
from streamtasks.app.config import AppConfig, make_app_config
from streamtasks.app.context import Output, ProcessorContext, Record, UndeclaredTopicError, UnknownStoreError
from streamtasks.app.events import (
    AppEvent,
    OffsetsCommitted,
    ProcessingStarted,
    RebalanceTriggered,
    RestoreCompleted,
    SubscriptionVersionChanged,
    TaskClosed,
    TaskCreated,
    TaskRecycled,
    TasksRevived,
    event_to_json,
)
from streamtasks.app.handlers import ErrorContext, HandlerResponse, HandlerResult
from streamtasks.app.processor import ProcessorSpec
from streamtasks.app.punctuation import Cancellable, PunctuationType
from streamtasks.app.tasks import ProcessingError, Processor

__all__ = [
    "App",
    "AppConfig",
    "AppEvent",
    "Cancellable",
    "ErrorContext",
    "HandlerResponse",
    "HandlerResult",
    "OffsetsCommitted",
    "Output",
    "ProcessingError",
    "ProcessingStarted",
    "Processor",
    "ProcessorContext",
    "ProcessorSpec",
    "PunctuationType",
    "RebalanceTriggered",
    "Record",
    "RestoreCompleted",
    "SubscriptionVersionChanged",
    "TaskClosed",
    "TaskCreated",
    "TaskRecycled",
    "TasksRevived",
    "UndeclaredTopicError",
    "UnknownStoreError",
    "event_to_json",
    "make_app_config",
]
