"""An App's metrics through OpenTelemetry (``metrics_otel``, the ``otel`` extra): the names,
labels and values of its Prometheus ``/metrics`` (:mod:`streamtasks.app.metrics`, the one
source) as OpenTelemetry instruments (:class:`streamtasks.runtime.otel.OtelBridge`).

``App(..., metrics_otel=True)`` reports to the API's global ``MeterProvider`` (the process
configures the SDK and its exporters, as for any instrumented library);
:func:`export_otel` reports to a given one. The snapshot the instruments report is refreshed in
the event loop on every App event (an interval commit is one, every ``commit_interval_ms``);
the instruments exist from the App's first event on (its first assignment).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.metrics import MeterProvider

from streamtasks.app.metrics import AppMetrics
from streamtasks.runtime.otel import OtelBridge

__all__ = ["export_otel"]


def export_otel(metrics: AppMetrics, meter_provider: MeterProvider | None = None) -> OtelBridge:
    """Report ``metrics`` (an App's ``metrics_exporter``) through ``meter_provider`` (default:
    the global one), refreshed on each of the App's events (call ``refresh()`` on the returned
    bridge to read it now)."""
    bridge = OtelBridge(metrics.registry, meter_provider)

    def on_event(_: Any) -> None:
        bridge.refresh()

    metrics.app.listeners.append(on_event)  # not now: the App may be half made (App.__init__)
    metrics.otel = bridge
    return bridge
