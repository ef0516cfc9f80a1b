"""``OpenTelemetryMiddleware``: traces and metrics of every run, step attempt, rollback and job
(docs/observability.md).

Needs only ``opentelemetry-api`` (the ``otel`` extra); the application installs the SDK (or
any other implementation) and its exporters. Without a configured provider the API's no-op
tracer and meter are used and nothing is recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from importlib.metadata import PackageNotFoundError, version
from types import TracebackType
from typing import Generic, TypeVar

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace

from reactor.middleware import (
    DeadLetterEvent,
    JobEvent,
    LockWaitEvent,
    Middleware,
    ParkEvent,
    ResumeEvent,
    RollbackEvent,
    RunEvent,
    StepEvent,
    SweepEvent,
)
from reactor.observability.metrics import Instruments
from reactor.observability.tracing import Tracing

__all__ = ["INSTRUMENTATION_NAME", "OpenTelemetryMiddleware"]

#: The instrumentation scope of reactor's tracer and meter.
INSTRUMENTATION_NAME = "reactor"


def _version() -> str:
    try:
        return version("reactor-saga")
    except PackageNotFoundError:
        return "0"


class OpenTelemetryMiddleware(Middleware):
    """Spans and metrics through OpenTelemetry (docs/observability.md).

    Register it with ``reactor.configure(middleware=[OpenTelemetryMiddleware()])``, or by name
    (``middleware=["otel"]``, ``REACTOR_MIDDLEWARE=otel``).

    Args:
        tracer_provider: where spans go; ``None``: the global provider.
        meter_provider: where metrics go; ``None``: the global provider.
        tracing: record spans (and stamp jobs with their trace context).
        metrics: record metrics.
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: otel_metrics.MeterProvider | None = None,
        tracing: bool = True,
        metrics: bool = True,
    ) -> None:
        release = _version()
        self.tracing: Tracing | None = (
            Tracing(trace.get_tracer(INSTRUMENTATION_NAME, release,
                                     tracer_provider=tracer_provider))
            if tracing else None
        )
        self.instruments: Instruments | None = (
            Instruments(_meter(release, meter_provider)) if metrics else None
        )

    @property
    def name(self) -> str:
        """``opentelemetry``."""
        return "opentelemetry"

    def run(self, event: RunEvent) -> AbstractContextManager[None] | None:
        """A ``run`` span; counts the run started and finished, its segment's duration."""
        instruments = self.instruments
        if instruments is not None:
            instruments.run_started(event)
        return _observed(self.tracing.run(event) if self.tracing else None,
                         instruments.run_ended if instruments else None, event)

    def step(self, event: StepEvent) -> AbstractContextManager[None] | None:
        """A ``step``/``undo``/``compensate`` span; the step duration histogram."""
        instruments = self.instruments
        return _observed(self.tracing.step(event) if self.tracing else None,
                         instruments.step_ended if instruments else None, event)

    def job(self, event: JobEvent) -> AbstractContextManager[None] | None:
        """A ``job`` span; queue lag and job duration."""
        instruments = self.instruments
        if instruments is not None:
            instruments.job_started(event)
        return _observed(self.tracing.job(event) if self.tracing else None,
                         instruments.job_ended if instruments else None, event)

    def rollback(self, event: RollbackEvent) -> AbstractContextManager[None] | None:
        """A ``rollback`` span; the rollback count."""
        instruments = self.instruments
        return _observed(self.tracing.rollback(event) if self.tracing else None,
                         instruments.rollback_ended if instruments else None, event)

    def on_park(self, event: ParkEvent) -> None:
        """A ``reactor.park`` span event; the park count."""
        if self.tracing is not None:
            self.tracing.park(event)
        if self.instruments is not None:
            self.instruments.parked(event)

    def on_resume(self, event: ResumeEvent) -> None:
        """A ``reactor.resume`` span event."""
        if self.tracing is not None:
            self.tracing.resume(event)

    def on_dead_letter(self, event: DeadLetterEvent) -> None:
        """The dead-letter count."""
        if self.instruments is not None:
            self.instruments.dead_lettered(event)

    def on_sweep(self, event: SweepEvent) -> None:
        """The sweeper re-dispatch count."""
        if self.instruments is not None:
            self.instruments.swept(event)

    def on_lock_wait(self, event: LockWaitEvent) -> None:
        """The lock wait histogram."""
        if self.instruments is not None:
            self.instruments.waited(event)


E = TypeVar("E", RunEvent, StepEvent, JobEvent, RollbackEvent)


class _Observed(Generic[E]):
    """A span's scope (or none) plus what the metrics record when it ends."""

    __slots__ = ("_after", "_event", "_span")

    def __init__(self, span: AbstractContextManager[None] | None,
                 after: Callable[[E], None] | None, event: E) -> None:
        self._span = span
        self._after: Callable[[E], None] | None = after
        self._event: E = event

    def __enter__(self) -> None:
        if self._span is not None:
            self._span.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._after is not None:
                self._after(self._event)
        finally:
            if self._span is not None:
                self._span.__exit__(exc_type, exc, tb)


def _observed(span: AbstractContextManager[None] | None, after: Callable[[E], None] | None,
              event: E) -> AbstractContextManager[None] | None:
    if span is None and after is None:
        return None
    return _Observed(span, after, event)


def _meter(release: str, provider: otel_metrics.MeterProvider | None) -> otel_metrics.Meter:
    return otel_metrics.get_meter(INSTRUMENTATION_NAME, release, meter_provider=provider)
