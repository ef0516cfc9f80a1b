"""W3C trace context in job payloads (docs/observability.md, "Propagation"): optional,
validated, ignored when absent or malformed; sweeper re-dispatches link instead of parent."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from reactor import Background, Input, Reactor, Success, input, step
from reactor.config import Runtime
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.jobs.worker import Worker
from reactor.model.status import RunStatus
from reactor.ports.payloads import (
    RunPayload,
    SweepPayload,
    TraceContext,
    job,
    parse_payload,
    stamping,
)
from reactor.ports.router import Job
from tests.observability.conftest import Telemetry

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@step(x=input("x"))
def double(inputs: Any, ctx: Any) -> int:
    return int(inputs.x) * 2


class Doubler(Reactor, name="obs.doubler"):
    x = Input(int)
    doubled = double
    returns = "doubled"
    background = Background(all=True)


def test_a_job_carries_the_trace_only_while_a_source_stamps_it() -> None:
    plain = job(RunPayload(context_id="r", reactor="x"))
    assert plain.payload == {"context_id": "r", "reactor": "x", "snooze_count": 0}
    carried = TraceContext(traceparent=TRACEPARENT, tracestate="k=v", enqueued_at=1.5)
    with stamping(lambda: carried):
        stamped = job(RunPayload(context_id="r", reactor="x"))
    assert stamped.payload["trace"] == {
        "traceparent": TRACEPARENT, "tracestate": "k=v", "link": False, "enqueued_at": 1.5,
    }
    assert parse_payload(stamped).trace == carried
    # a re-enqueued payload keeps the trace it carries when nothing stamps here
    assert job(parse_payload(stamped)).payload["trace"]["traceparent"] == TRACEPARENT


@pytest.mark.parametrize("trace", [
    {"traceparent": "00-00000000000000000000000000000000-b7ad6b7169203331-01"},  # zero id
    {"traceparent": "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},  # version ff
    {"traceparent": "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"},  # upper case
    {"traceparent": TRACEPARENT, "tracestate": "x" * 513},
    {"traceparent": TRACEPARENT, "tracestate": "k=v\n"},
    {"traceparent": TRACEPARENT, "enqueued_at": -1},
    {"tracestate": "k=v"},
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
])
def test_a_malformed_trace_is_dropped_naming_the_field_and_the_job_still_parses(
    trace: Any, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="reactor.worker")
    payload = parse_payload(Job(kind="run", payload={
        "context_id": "r", "reactor": "x", "trace": trace,
    }))
    assert isinstance(payload, RunPayload) and payload.trace is None
    assert payload.context_id == "r"
    (line,) = [r.getMessage() for r in caplog.records
               if "event=job_trace_dropped" in r.getMessage()]
    assert "kind=run reason=trace." in line


def _root_job_spans(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith("job ") and s.parent is None]


@pytest.mark.parametrize("trace", [None, {"traceparent": "garbage"}])
def test_old_payloads_without_trace_context_still_run(
    trace: Any, telemetry: Telemetry, configure: Callable[..., Runtime],
) -> None:
    runtime = configure(telemetry.middleware)
    worker = Worker(runtime, liveness_wait=0.0)
    handle = Doubler.run(x=21)
    run_id = handle.run_id  # type: ignore[union-attr]
    for delivery in runtime.router.receive(1):  # replaced by the job an older version enqueued
        assert "trace" in delivery.job.payload
        runtime.router.ack(delivery)
    old: dict[str, Any] = {"context_id": run_id, "reactor": "obs.doubler"}
    if trace is not None:
        old["trace"] = trace  # malformed: dropped, the job runs untraced
    runtime.router.enqueue(Job(kind="run", payload=old))
    assert worker.run_pending() == 1
    assert handle.wait(5) == Success(42, run_id=run_id)  # type: ignore[union-attr]
    (root,) = _root_job_spans(telemetry.spans())  # untraced job: a trace of its own
    assert root.name == "job run" and not root.links
    assert root.attributes["reactor.run.id"] == run_id
    assert "reactor.job.queue_lag" not in root.attributes  # no enqueue time carried
    assert telemetry.total("reactor.runs.finished", **{"reactor.run.status": "completed"}) == 1


def test_a_job_from_a_traced_process_continues_its_trace_with_its_queue_lag(
    telemetry: Telemetry, configure: Callable[..., Runtime],
) -> None:
    runtime = configure(telemetry.middleware)
    handle = Doubler.run(x=1)
    assert Worker(runtime, liveness_wait=0.0).run_pending() == 1
    assert handle.wait(5).success  # type: ignore[union-attr]
    spans = telemetry.spans()
    caller = next(s for s in spans if s.name == "run obs.doubler" and s.parent is None)
    job_span = next(s for s in spans if s.name == "job run")
    assert job_span.parent.span_id == caller.context.span_id
    assert job_span.attributes["reactor.job.queue_lag"] >= 0
    assert telemetry.total("reactor.job.queue_lag", **{"reactor.job.kind": "run"}) == 1


def test_a_sweeper_redispatch_links_to_the_sweep_instead_of_continuing_its_trace(
    telemetry: Telemetry, configure: Callable[..., Runtime],
) -> None:
    runtime = configure(telemetry.middleware)
    worker = Worker(runtime, liveness_wait=0.0)
    handle = Doubler.run(x=4)
    run_id = handle.run_id  # type: ignore[union-attr]
    for delivery in runtime.router.receive(1):  # the worker died with the job: it is lost
        runtime.router.ack(delivery)
    ctx = load_context(make_env(runtime), run_id)
    assert ctx is not None and ctx.status is RunStatus.RUNNING
    runtime.router.enqueue(job(SweepPayload(window=0)))
    assert worker.run_pending() == 2  # the sweep, then the run it re-dispatched
    assert handle.wait(5) == Success(8, run_id=run_id)  # type: ignore[union-attr]
    spans = telemetry.spans()
    sweep = next(s for s in spans if s.name == "job sweep")
    redispatched = next(s for s in spans if s.name == "job run")
    assert redispatched.parent is None  # a trace of its own...
    assert redispatched.context.trace_id != sweep.context.trace_id
    (link,) = redispatched.links  # ...linked to the sweep that recovered it
    assert link.context.span_id == sweep.context.span_id
    assert link.attributes == {"reactor.link.reason": "redispatch"}
    assert telemetry.total("reactor.sweeper.redispatches",
                           **{"reactor.sweeper.name": "runs"}) == 1
