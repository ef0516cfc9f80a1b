"""Per-step cost of observability (docs/observability.md, "Overhead").

Runs the 10-step reactor of ``benchmarks/engine_overhead.py`` (memory storage, inline router)
in one process under five runtimes, interleaved in short chunks (each variant taking every
position in the rotation, after a garbage collection) so every variant sees the same machine
load, and prints the median CPU time (``time.thread_time``: the run is synchronous, and time
other processes take on a shared machine is not counted) per run and per step, with the ratio
against the plain run:

* ``plain``: no middleware (the engine builds no event: one ``hooks.active`` check and a
  shared do-nothing scope per step);
* ``no-op middleware``: one :class:`reactor.middleware.Middleware` whose hooks do nothing (the
  engine builds every event and runs the chain);
* ``otel, API no-op``: :class:`reactor.observability.OpenTelemetryMiddleware` on the API's
  no-op tracer and meter (what an application gets without an SDK);
* ``otel tracing``: the SDK tracing to an in-memory exporter (``SimpleSpanProcessor``), no
  metrics;
* ``otel tracing+metrics``: the same plus the SDK's metrics (``InMemoryMetricReader``).

It also times the no-middleware path of one step scope in isolation (``observe.step`` on a
runtime without middleware, entered and exited) to show what "no measurable extra" means.
No assertion is made: this prints a measurement (docs/architecture.md, "Repository layout").

Usage::

    .venv/bin/python benchmarks/observability_overhead.py [--runs N] [--rounds R]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from reactor import Reactor, config
from reactor.config import Runtime
from reactor.dsl import Input, input, result, step
from reactor.engine import observe
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.env import make_env
from reactor.engine.state import RunState
from reactor.middleware import Middleware
from reactor.model.context import Context
from reactor.model.results import Success
from reactor.observability import OpenTelemetryMiddleware

STEPS = 10


def _add_one(inputs: Any, ctx: Any) -> int:
    return int(inputs.x) + 1


def _build_reactor() -> type[Reactor]:
    namespace: dict[str, Any] = {"__module__": __name__, "start": Input(int)}
    namespace["s0"] = step(_add_one, x=input("start"))
    for i in range(1, STEPS):
        namespace[f"s{i}"] = step(_add_one, x=result(f"s{i - 1}"))
    namespace["returns"] = f"s{STEPS - 1}"
    return type("ObservedTenSteps", (Reactor,), namespace)


def _runtimes() -> tuple[dict[str, Runtime], InMemorySpanExporter, InMemorySpanExporter]:
    tracing_only, both = InMemorySpanExporter(), InMemorySpanExporter()
    providers = []
    for exporter in (tracing_only, both):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        providers.append(provider)
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    variants: dict[str, list[Middleware]] = {
        "plain": [],
        "no-op middleware": [Middleware()],
        "otel, API no-op": [OpenTelemetryMiddleware(
            tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())],
        "otel tracing": [OpenTelemetryMiddleware(tracer_provider=providers[0], metrics=False)],
        "otel tracing+metrics": [OpenTelemetryMiddleware(
            tracer_provider=providers[1], meter_provider=meters)],
    }
    built = {}
    for name, middleware in variants.items():
        built[name] = config.configure(storage="memory://", router="inline://",
                                       middleware=middleware)
    return built, tracing_only, both


def _null_scope_cost(runtime: Runtime, n: int = 200_000) -> float:
    """Seconds per ``with observe.step(...) as seen: seen.done(result)`` without middleware."""
    env = make_env(runtime)
    ctx = Context(context_id="bench", reactor="bench")
    state = RunState(_build_reactor().definition, ctx, env, Checkpointer(env, ctx))
    value = Success(1)
    started = time.thread_time()
    for _ in range(n):
        with observe.step(state, "s0", attempt=1) as seen:
            seen.done(value)
    return (time.thread_time() - started) / n


def main() -> None:
    """Measure and print the overhead figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="runs per chunk")
    parser.add_argument("--rounds", type=int, default=12, help="chunks per variant")
    args = parser.parse_args()

    reactor_cls = _build_reactor()
    runtimes, *exporters = _runtimes()
    for runtime in runtimes.values():  # warm up and sanity check each
        config.swap(runtime)
        assert reactor_cls.run(start=0).value == STEPS  # type: ignore[union-attr]

    samples: dict[str, list[float]] = {name: [] for name in runtimes}
    names = list(runtimes)
    for round_ in range(args.rounds):
        shift = round_ % len(names)  # each variant takes every position in turn
        for name in names[shift:] + names[:shift]:
            gc.collect()
            config.swap(runtimes[name])
            started = time.thread_time()  # CPU time: other processes' load is not counted
            for _ in range(args.runs):
                reactor_cls.run(start=0)
            samples[name].append((time.thread_time() - started) / args.runs)
            for exporter in exporters:
                exporter.clear()
    per_run = {name: statistics.median(values) for name, values in samples.items()}
    plain = per_run["plain"]
    print(f"steps per run: {STEPS}; {args.rounds} interleaved chunks of {args.runs} runs each; "
          "medians")
    print(f"{'variant':24} {'per run':>11} {'per step':>10} {'extra/step':>11} {'ratio':>7}")
    for name, value in per_run.items():
        print(f"{name:24} {value * 1e6:8.1f} us {value / STEPS * 1e6:7.1f} us "
              f"{(value - plain) / STEPS * 1e6:8.1f} us {value / plain:6.2f}x")
    null = _null_scope_cost(runtimes["plain"])
    print(f"no-middleware step scope alone: {null * 1e9:.0f} ns "
          f"({null / (plain / STEPS) * 100:.2f}% of a plain step)")
    config.swap(None)
    for runtime in runtimes.values():
        runtime.router.close()
        runtime.storage.close()


if __name__ == "__main__":
    main()
