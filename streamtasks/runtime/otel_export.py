"""An OTLP metric exporter that reports a failing receiver in one log line (the ``otel`` extra).

The OTLP/HTTP exporter retries a refused connection with a back-off until its timeout
(``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s), logging a warning for every retry and an error at the
end, and does it again at every export interval while the receiver stays down.
:class:`ReportingExporter` wraps it: the records the wrapped exporter logs during an export are
held back (a filter on its logger, active only in the thread and for the call that exports),
and the wrapper logs one line when exports start failing (the endpoint, its user information
removed, and the cause) and one when they work again. An export runs in the periodic reader's
thread, never in the event loop: a receiver that is down costs that thread the timeout and
nothing else.
"""

from __future__ import annotations

import contextvars
import logging
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData

__all__ = ["ReportingExporter", "redacted_endpoint"]

log = logging.getLogger("streamtasks.otel")

#: The loggers the OTLP/HTTP metric exporter and its HTTP client write to.
EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.metric_exporter",)

_held: contextvars.ContextVar[list[logging.LogRecord] | None] = contextvars.ContextVar(
    "streamtasks_otel_held", default=None
)


class _HoldBack(logging.Filter):
    """Keeps the wrapped exporter's records out of the handlers while a wrapper exports."""

    def filter(self, record: logging.LogRecord) -> bool:
        held = _held.get()
        if held is None:
            return True  # an exporter of the process's own, not ours
        held.append(record)
        return False


_FILTER = _HoldBack()


def _install() -> None:
    for name in EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


@contextmanager
def _holding() -> Iterator[list[logging.LogRecord]]:
    held: list[logging.LogRecord] = []
    token = _held.set(held)
    try:
        yield held
    finally:
        _held.reset(token)


def redacted_endpoint(url: str) -> str:
    """``url`` without user information (``https://user:pw@host`` -> ``https://host``)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")\]]+")
_CODE = re.compile(r"code: (\d+), reason: ([^,]+)$")


def _cause(held: list[logging.LogRecord], endpoint: str) -> str:
    """Why an export failed: from what the exporter logged (an errno, an HTTP status) or, when
    it only said it gave up (its timeout came before a retry), from one TCP connect to the
    endpoint."""
    for record in held:
        message = record.getMessage()
        if errno := _ERRNO.search(message):
            return errno.group(0).strip()
        if (code := _CODE.search(message)) and code.group(1) != "None":
            return f"HTTP {code.group(1)} {code.group(2).strip()}"
    parts = urlsplit(endpoint)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname or "localhost", port), timeout=2.0):
            pass
    except (OSError, ValueError) as exc:
        return str(exc) or type(exc).__name__
    last = held[-1].getMessage().rstrip(".")[:200] if held else "no answer"
    return f"{last} (the port accepts connections: no answer within OTEL_EXPORTER_OTLP_TIMEOUT?)"


class ReportingExporter(MetricExporter):
    """``inner`` (an OTLP exporter) with one log line per failing episode (module docstring)."""

    def __init__(self, inner: MetricExporter, endpoint: str) -> None:
        super().__init__(
            preferred_temporality=getattr(inner, "_preferred_temporality", None),
            preferred_aggregation=getattr(inner, "_preferred_aggregation", None),
        )
        self.inner = inner
        self.endpoint = redacted_endpoint(endpoint)
        #: Exports that failed since the last success (0: working).
        self.failures = 0
        _install()

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        with _holding() as held:
            try:
                result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            except Exception as exc:  # an exporter bug must not end the reader's thread
                held.append(logging.makeLogRecord({"msg": f"{type(exc).__name__}: {exc}"}))
                result = MetricExportResult.FAILURE
        if result is MetricExportResult.SUCCESS:
            if self.failures:
                log.info(
                    "OTLP metrics export to %s works again (%d exports failed)", self.endpoint, self.failures
                )
            self.failures = 0
            return result
        self.failures += 1
        if self.failures == 1:
            log.warning(
                "OTLP metrics export to %s failed: %s; /metrics is unaffected, each export interval retries "
                "(logged again once it works)",
                self.endpoint,
                _cause(held, self.endpoint),
            )
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis=timeout_millis))

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)
