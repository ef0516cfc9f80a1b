"""A run resumed from an interrupt links to the trace that paused it (docs/observability.md,
"Resumed runs"): the pausing span's W3C context is stored with the pending interrupt, and the
resumed segment — in the caller, or the ``run`` job a background resume enqueues — carries a
span link to it (``reactor.link.reason=resume``), continuing the caller's trace when one is
current."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel

from reactor import Input, Paused, Reactor, Success, input, interrupt, result, step
from reactor.config import Runtime
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.jobs.worker import Worker
from reactor.ports.payloads import TraceContext, stamping
from tests.observability.conftest import Telemetry

#: The trace context of a traced unit that calls ``resume`` (it stamps the jobs it enqueues).
ENQUEUER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Verdict(BaseModel):
    ok: bool


@step(x=input("x"))
def prepare(inputs: Any, ctx: Any) -> int:
    return int(inputs.x)


class Gate(Reactor, name="obs.resume_trace.gate"):
    x = Input(int)
    prepare = prepare
    verdict = interrupt(wait_for="prepare", schema=Verdict)

    @step(v=result("verdict"))
    def finish(inputs: Any, ctx: Any) -> str:
        return "done"

    returns = "finish"


def _pause(runtime: Runtime) -> tuple[str, str]:
    """Run a ``Gate`` until it pauses (in the caller, traced); its run id and the
    ``traceparent`` stored with its interrupt."""
    paused = Gate.run(x=1)
    assert isinstance(paused, Paused) and paused.run_id is not None
    ctx = load_context(make_env(runtime), paused.run_id)
    assert ctx is not None and ctx.engine_state.interrupt is not None
    traceparent = ctx.engine_state.interrupt.traceparent
    assert traceparent is not None
    return paused.run_id, traceparent


def _pausing_trace(spans: list[ReadableSpan], run_id: str) -> int:
    first = next(s for s in spans if s.name == "run obs.resume_trace.gate"
                 and s.attributes["reactor.run.id"] == run_id)
    return first.context.trace_id


def _resume_link(span: ReadableSpan, traceparent: str) -> None:
    (link,) = span.links
    assert link.attributes == {"reactor.link.reason": "resume"}
    assert f"{link.context.trace_id:032x}" == traceparent.split("-")[1]
    assert f"{link.context.span_id:016x}" == traceparent.split("-")[2]


@pytest.mark.parametrize("caller_span", [False, True])
def test_an_inline_resume_links_its_run_span_to_the_pausing_span(
    telemetry: Telemetry, configure: Callable[..., Runtime], caller_span: bool,
) -> None:
    runtime = configure(telemetry.middleware)
    run_id, traceparent = _pause(runtime)
    paused_trace = _pausing_trace(telemetry.spans(), run_id)
    assert traceparent.split("-")[1] == f"{paused_trace:032x}"
    tracer = telemetry.tracer()
    if caller_span:
        with tracer.start_as_current_span("handler") as handler:
            done = Gate.resume(run_id, payload={"ok": True})
        caller_trace = handler.get_span_context().trace_id
    else:
        done = Gate.resume(run_id, payload={"ok": True})
    assert done == Success("done", run_id=run_id)
    resumed = [s for s in telemetry.spans() if s.name == "run obs.resume_trace.gate"
               and s.attributes["reactor.run.origin"] == "resume"]
    (segment,) = resumed
    _resume_link(segment, traceparent)
    if caller_span:
        assert segment.context.trace_id == caller_trace  # continues the caller's trace
    else:
        assert segment.parent is None and segment.context.trace_id != paused_trace


@pytest.mark.parametrize("enqueuer", [False, True])
def test_a_background_resume_links_the_workers_job_span_to_the_pausing_span(
    telemetry: Telemetry, configure: Callable[..., Runtime], enqueuer: bool,
) -> None:
    """Without a stamping span the job starts a trace of its own linked to the pause; inside
    one (a resume called from a traced unit) it continues that trace and still links."""
    runtime = configure(telemetry.middleware)
    run_id, traceparent = _pause(runtime)
    paused_trace = _pausing_trace(telemetry.spans(), run_id)
    if enqueuer:
        with stamping(lambda: TraceContext(traceparent=ENQUEUER)):
            handle = Gate.resume(run_id, payload={"ok": True}, resume="background")
    else:
        handle = Gate.resume(run_id, payload={"ok": True}, resume="background")
    assert Worker(runtime, liveness_wait=0.0).run_pending() == 1
    assert handle.wait(5) == Success("done", run_id=run_id)  # type: ignore[union-attr]
    (job_span,) = [s for s in telemetry.spans() if s.name == "job run"]
    _resume_link(job_span, traceparent)
    if enqueuer:
        assert job_span.parent is not None
        assert f"{job_span.parent.span_id:016x}" == ENQUEUER.split("-")[2]
        assert f"{job_span.context.trace_id:032x}" == ENQUEUER.split("-")[1]
    else:
        assert job_span.parent is None and job_span.context.trace_id != paused_trace
    segment = next(s for s in telemetry.spans() if s.name == "run obs.resume_trace.gate"
                   and s.parent is not None and s.parent.span_id == job_span.context.span_id)
    assert segment.attributes["reactor.run.status"] == "completed"


def test_an_untraced_pause_stores_the_interrupt_as_before(
    configure: Callable[..., Runtime],
) -> None:
    runtime = configure()
    paused = Gate.run(x=1)
    assert isinstance(paused, Paused) and paused.run_id is not None
    ctx = load_context(make_env(runtime), paused.run_id)
    assert ctx is not None and ctx.engine_state.interrupt is not None
    stored = ctx.engine_state.interrupt.to_json()
    assert "traceparent" not in stored and "tracestate" not in stored
    assert Gate.resume(paused.run_id, payload={"ok": True}) == Success(
        "done", run_id=paused.run_id)
