"""Fixtures for the observability tests (docs/observability.md): the OpenTelemetry SDK's
in-memory span exporter and metric reader behind an :class:`OpenTelemetryMiddleware`, a runtime
whose router only queues, and worker threads to run its jobs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from reactor import config
from reactor.config import Runtime
from reactor.jobs.worker import Worker
from reactor.middleware import Middleware, enable_log_context
from reactor.observability import OpenTelemetryMiddleware


@dataclass
class Telemetry:
    """What the middleware recorded."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    middleware: OpenTelemetryMiddleware
    provider: TracerProvider

    def tracer(self) -> Tracer:
        """A tracer of the same provider, for spans the test itself starts (a caller's)."""
        return self.provider.get_tracer("tests.observability")

    def spans(self) -> list[ReadableSpan]:
        """Every finished span so far."""
        return list(self.exporter.get_finished_spans())

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """``(attributes, value)`` of each data point of metric ``name`` (a counter's sum, a
        histogram's count)."""
        found: list[tuple[dict[str, Any], Any]] = []
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        found.append((dict(point.attributes or {}),
                                      value if value is not None else point.count))
        return found

    def total(self, name: str, **attributes: Any) -> Any:
        """The sum of metric ``name``'s points whose attributes include ``attributes``."""
        return sum(v for a, v in self.points(name)
                   if all(a.get(k) == w for k, w in attributes.items()))


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(exporter, reader, OpenTelemetryMiddleware(
        tracer_provider=tracer_provider, meter_provider=meter_provider,
    ), tracer_provider)
    meter_provider.shutdown()
    tracer_provider.shutdown()


@pytest.fixture
def configure() -> Iterator[Callable[..., Runtime]]:
    """``configure(*middleware, **settings)``: a fresh in-memory runtime whose ``local://``
    router only queues (jobs run on the test's :func:`workers`)."""

    def build(*middleware: Middleware, **settings: Any) -> Runtime:
        return config.configure(
            storage="memory://", router="local://?workers=0&visibility_timeout=30",
            middleware=list(middleware), lock_snooze_base_delay=0.02,
            lock_snooze_jitter=0.02, **settings,
        )

    config.reset()
    yield build
    config.reset()
    enable_log_context(False)


@pytest.fixture
def workers() -> Iterator[Callable[[Runtime], Worker]]:
    """``workers(runtime)``: two started worker threads, stopped (in-flight jobs finished, so
    every span has ended) by the test or at teardown."""
    started: list[Worker] = []

    def start(runtime: Runtime, threads: int = 2) -> Worker:
        worker = Worker(runtime, threads=threads, poll_seconds=0.02, liveness_wait=0.0)
        worker.start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop(timeout=10)
