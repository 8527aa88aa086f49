"""The process's Prometheus metrics, exported through OpenTelemetry too (the ``otel`` extra).

One metric source feeds both exporters: the Prometheus collectors an App and ``streamtasks
coordinator`` already have (:class:`streamtasks.app.metrics.AppMetrics`,
:class:`streamtasks.server.metrics.CoordinatorMetrics`). :class:`OtelBridge` reads their
registry and reports every sample as an OpenTelemetry asynchronous instrument of the
same name, with the Prometheus labels as attributes:

* a counter (``..._total``) as an ``ObservableCounter`` named as the ``_total`` sample;
* a gauge as an ``ObservableGauge`` of the family's name;
* a histogram or summary (the commit latency) as two ``ObservableCounter`` s, ``<name>_sum`` and
  ``<name>_count`` (the mean over an interval is their rates' quotient; the buckets stay
  Prometheus').

The registry is read in the event loop (:meth:`OtelBridge.refresh`: on each App event, or every
``interval`` by :meth:`OtelBridge.run`); the instruments' callbacks, which a periodic reader calls
from its own thread, only return that snapshot. An instrument is created for each name the
first time a refresh sees it (never from a callback: the SDK collects under its lock).

:func:`sdk_meter_provider` builds an SDK ``MeterProvider`` exporting to the console or over OTLP
(``opentelemetry-exporter-otlp-proto-http``, configured by the standard ``OTEL_EXPORTER_OTLP_*``
environment variables) for a process that has none (``streamtasks coordinator --otel-metrics``);
its OTLP exporter logs a receiver that is down in one line
(:class:`streamtasks.runtime.otel_export.ReportingExporter`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable, Mapping
from typing import IO, Literal

from opentelemetry import metrics as otel
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation
from prometheus_client import CollectorRegistry

from streamtasks.errors import ConfigError

__all__ = ["OtelBridge", "Point", "sdk_meter_provider", "snapshot"]

#: The instrumentation scope the instruments are created under.
SCOPE = "streamtasks"

Kind = Literal["counter", "gauge"]
#: An instrument's kind, description and values (attributes, value) at the last refresh.
Point = tuple[Mapping[str, str], float]


def snapshot(registry: CollectorRegistry) -> dict[str, tuple[Kind, str, list[Point]]]:
    """What a scrape of ``registry`` reads, by OpenTelemetry instrument name (module docstring)."""
    out: dict[str, tuple[Kind, str, list[Point]]] = {}
    for family in registry.collect():
        for sample in family.samples:
            name = sample.name
            kind: Kind
            if family.type == "counter":
                if not name.endswith("_total"):
                    continue  # _created
                kind = "counter"
            elif family.type in ("histogram", "summary", "gaugehistogram"):
                if not name.endswith(("_sum", "_count")):
                    continue  # _bucket, quantiles, _created
                kind = "counter"
            else:
                kind = "gauge"
            entry = out.setdefault(name, (kind, family.documentation, []))
            entry[2].append((dict(sample.labels), float(sample.value)))
    return out


class OtelBridge:
    """Reports ``registry``'s samples through ``meter_provider`` (the API's global one by
    default) as OpenTelemetry instruments (module docstring)."""

    def __init__(self, registry: CollectorRegistry, meter_provider: MeterProvider | None = None) -> None:
        self.registry = registry
        provider = meter_provider if meter_provider is not None else otel.get_meter_provider()
        self.provider = provider
        self.meter: Meter = provider.get_meter(SCOPE)
        self._points: dict[str, list[Point]] = {}
        self._instruments: set[str] = set()

    @property
    def names(self) -> frozenset[str]:
        """The instruments created so far."""
        return frozenset(self._instruments)

    def refresh(self) -> None:
        """Read the registry (in the event loop); create the instruments of new names."""
        taken = snapshot(self.registry)
        self._points = {name: points for name, (_, _, points) in taken.items()}
        for name, (kind, doc, _) in taken.items():
            if name in self._instruments:
                continue
            self._instruments.add(name)
            callbacks = [self._callback(name)]
            if kind == "counter":
                self.meter.create_observable_counter(name, callbacks=callbacks, description=doc)
            else:
                self.meter.create_observable_gauge(name, callbacks=callbacks, description=doc)

    def _callback(self, name: str) -> otel.CallbackT:
        def observe(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, dict(labels)) for labels, value in self._points.get(name, ())]

        return observe

    async def run(self, interval_s: float) -> None:
        """Refresh every ``interval_s`` until cancelled."""
        while True:
            self.refresh()
            await asyncio.sleep(interval_s)


def sdk_meter_provider(exporter: Literal["console", "otlp"], *, out: IO[str] | None = None) -> MeterProvider:
    """An SDK ``MeterProvider`` whose periodic reader (``OTEL_METRIC_EXPORT_INTERVAL``, default
    60 s) exports to the console or over OTLP/HTTP (a failing receiver: one log line, the
    export retried each interval); a :class:`ConfigError` when the SDK or the
    OTLP exporter is not installed. ``out``: where the console exporter writes (stdout)."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            MetricExporter,
            PeriodicExportingMetricReader,
        )
    except ImportError as exc:
        raise ConfigError(
            f"OpenTelemetry metrics need pip install 'streamtasks-kafka[otel]' ({exc})"
        ) from None
    chosen: MetricExporter
    if exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        except ImportError as exc:
            raise ConfigError(
                f"OTLP export needs pip install opentelemetry-exporter-otlp-proto-http ({exc})"
            ) from None
        from streamtasks.runtime.otel_export import ReportingExporter

        otlp = OTLPMetricExporter()  # the OTEL_EXPORTER_OTLP_* variables (headers too)
        chosen = ReportingExporter(otlp, str(getattr(otlp, "_endpoint", "the OTLP endpoint")))
    else:
        chosen = ConsoleMetricExporter(out=out if out is not None else sys.stdout)
    return SdkMeterProvider(metric_readers=[PeriodicExportingMetricReader(chosen)])
