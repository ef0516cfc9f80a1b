"""Traces through the OpenTelemetry middleware (docs/observability.md, "Spans"): a background run
with an async step and a fan-out map of 5 elements, run by worker threads, is one trace whose
spans nest run -> step -> job -> element run, and no span shows a redacted value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from reactor import (
    Background,
    Failure,
    FanOut,
    Input,
    Reactor,
    Step,
    Success,
    async_step,
    element,
    input,
    map_step,
    result,
    step,
)
from reactor.config import Runtime
from reactor.jobs.worker import Worker
from reactor.testing import TestEnvironment
from tests.observability.conftest import Telemetry

SECRET = "tok_live_7f3a9c"


class Charge(Step):
    amount = Input(int)
    card = Input(str, redact=True)

    def run(self) -> dict[str, int]:
        return {"charged": self.inputs.amount}


class Pack(Reactor, name="obs.pack"):
    sku = Input(str)
    card = Input(str)

    @step(sku=input("sku"), card=input("card"))
    def pick(inputs: Any, ctx: Any) -> str:
        return f"picked {inputs.sku}"


class Order(Reactor, name="obs.order"):
    skus = Input(list)
    amount = Input(int)
    card = Input(str, redact=True)
    background = Background(all=True)

    charge = async_step(Charge, amount=input("amount"), card=input("card"))
    lines = map_step(
        Pack, source=input("skus"), args={"sku": element("lines"), "card": input("card")},
        fan_out=FanOut(batch_size=5),
    )

    @step(charged=result("charge"), lines=result("lines"))
    def ship(inputs: Any, ctx: Any) -> str:
        return "shipped"


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _one(spans: list[ReadableSpan], name: str, **attributes: Any) -> ReadableSpan:
    found = [s for s in spans if s.name == name
             and all((s.attributes or {}).get(k) == v for k, v in attributes.items())]
    assert len(found) == 1, (name, attributes, [(s.name, dict(s.attributes or {})) for s in found])
    return found[0]


def _text_of(span: ReadableSpan) -> str:
    """Everything a span shows: name, attributes, status, events and links."""
    parts = [span.name, repr(dict(span.attributes or {})), repr(span.status.description)]
    parts += [f"{e.name}{dict(e.attributes or {})}" for e in span.events]
    parts += [repr(dict(link.attributes or {})) for link in span.links]
    return " ".join(parts)


def test_a_background_run_is_one_trace_nesting_run_step_job_element_run(
    telemetry: Telemetry, configure: Callable[..., Runtime],
    workers: Callable[[Runtime], Worker],
) -> None:
    runtime = configure(telemetry.middleware)
    worker = workers(runtime)
    handle = Order.run(skus=["a", "b", "c", "d", "e"], amount=5, card=SECRET)
    outcome = handle.wait(30)  # type: ignore[union-attr]
    worker.stop(timeout=10)  # in-flight jobs finished: every span has ended
    assert isinstance(outcome, Success), outcome
    spans = telemetry.spans()

    assert len({s.context.trace_id for s in spans}) == 1  # one trace

    caller = _one(spans, "run obs.order", **{"reactor.run.origin": "start"})
    assert caller.parent is None
    assert caller.attributes["reactor.run.status"] == "suspended"
    handed = _children(spans, caller)
    assert [s.name for s in handed] == ["job run"]
    assert handed[0].kind is SpanKind.CONSUMER

    segments = [s for s in spans if s.name == "run obs.order"
                and s.attributes["reactor.run.origin"] == "worker"]
    first, last = sorted(segments, key=lambda s: s.start_time)
    assert first.parent.span_id == handed[0].context.span_id
    assert first.attributes["reactor.run.status"] == "suspended"  # waits for its map
    assert last.attributes["reactor.run.status"] == "completed"

    # the async step: its job is a child of the run segment that dispatched it
    step_job = _one(spans, "job step")
    assert step_job.parent.span_id == first.context.span_id
    charge = _one(spans, "step charge")
    assert charge.parent.span_id == step_job.context.span_id
    assert charge.attributes["reactor.step.status"] == "completed"
    assert charge.attributes["reactor.step.attempt"] == 1

    # the fan-out map: run -> step -> job -> element run -> element step
    map_step_span = _one(spans, "step lines", **{"reactor.step.status": "suspended"})
    assert map_step_span.parent.span_id == first.context.span_id
    element_jobs = _children(spans, map_step_span)
    assert sorted(s.name for s in element_jobs) == ["job map_element"] * 5
    assert sorted(s.attributes["reactor.map.index"] for s in element_jobs) == [0, 1, 2, 3, 4]
    for job_span in element_jobs:
        (element_run,) = [s for s in _children(spans, job_span) if s.name.startswith("run ")]
        assert element_run.name == "run obs.pack"
        assert element_run.attributes["reactor.run.origin"] == "element"
        assert element_run.attributes["reactor.run.status"] == "completed"
        assert element_run.attributes["reactor.run.root_id"] == handle.run_id  # type: ignore[union-attr]
        (pick,) = _children(spans, element_run)
        assert pick.name == "step pick"
    # the element that settled last enqueued the collector, which resumed the owner
    collector = _one(spans, "job map_collect")
    assert collector.parent.span_id in {s.context.span_id for s in element_jobs}
    (resumed_job,) = _children(spans, collector)
    assert resumed_job.name == "job run"
    assert _children(spans, resumed_job) == [last]
    assert sorted(s.name for s in _children(spans, last)) == ["step lines", "step ship"]

    for span in spans:
        assert SECRET not in _text_of(span), span.name
        assert span.attributes.get("reactor.run.id") != SECRET


class Capture(Step):
    amount = Input(int)
    card = Input(str, redact=True)

    def run(self) -> None:
        raise ValueError(f"card {self.inputs.card} declined for {self.inputs.amount}")

    def compensate(self) -> None:
        return None


class Reserve(Step):
    amount = Input(int)

    def run(self) -> str:
        return "held"

    def undo(self) -> None:
        return None


class Payment(Reactor, name="obs.payment"):
    amount = Input(int)
    card = Input(str, redact=True)
    reserve = step(Reserve, amount=input("amount"))
    capture = step(Capture, amount=input("amount"), card=input("card"), wait_for="reserve")


def test_a_failed_run_traces_its_rollback_and_masks_the_secret_in_messages(
    telemetry: Telemetry, configure: Callable[..., Runtime],
) -> None:
    configure(telemetry.middleware)
    outcome = Payment.run(amount=7, card=SECRET)
    assert isinstance(outcome, Failure)
    assert SECRET in outcome.message  # the engine's own Failure keeps the message as raised
    spans = telemetry.spans()

    run = _one(spans, "run obs.payment")
    assert run.attributes["reactor.run.status"] == "failed"
    assert run.attributes["error.type"] == "ValueError"
    assert run.attributes["reactor.step.name"] == "capture"
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description == "card [REDACTED] declined for 7"

    capture = _one(spans, "step capture")
    assert capture.parent.span_id == run.context.span_id
    assert capture.attributes["reactor.step.status"] == "failed"
    assert capture.attributes["reactor.step.retryable"] is True
    assert capture.status.description == "card [REDACTED] declined for 7"

    rollback = _one(spans, "rollback obs.payment")
    assert rollback.parent.span_id == run.context.span_id
    assert rollback.attributes["reactor.rollback.reason"] == "step_failed"
    assert rollback.attributes["reactor.rollback.step"] == "capture"
    assert rollback.attributes["reactor.rollback.status"] == "completed"
    assert [s.name for s in sorted(_children(spans, rollback), key=lambda s: s.start_time)] == [
        "compensate capture", "undo reserve",
    ]
    assert _one(spans, "undo reserve").attributes["reactor.step.action"] == "undo"
    for span in spans:
        assert SECRET not in _text_of(span), span.name


def test_every_retry_is_an_attempt_span_of_its_own(
    telemetry: Telemetry, configure: Callable[..., Runtime],
) -> None:
    from reactor import Retries

    calls: list[int] = []

    @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=0))
    def flaky(inputs: Any, ctx: Any) -> str:
        calls.append(ctx.attempt)
        if len(calls) < 3:
            raise ConnectionError("try again")
        return "ok"

    class Flaky(Reactor, name="obs.flaky"):
        work = flaky

    configure(telemetry.middleware)
    assert isinstance(Flaky.run(), Success)
    attempts = sorted((s for s in telemetry.spans() if s.name == "step work"),
                      key=lambda s: s.attributes["reactor.step.attempt"])
    assert [(s.attributes["reactor.step.attempt"], s.attributes["reactor.step.status"])
            for s in attempts] == [(1, "failed"), (2, "failed"), (3, "completed")]


def test_the_testing_kit_takes_middleware(telemetry: Telemetry) -> None:
    with TestEnvironment(middleware=[telemetry.middleware]) as env:
        handle = Order.run(skus=["a", "b"], amount=3, card=SECRET)
        env.run_until_idle()
        assert handle.status().value == "completed"  # type: ignore[union-attr]
    spans = telemetry.spans()
    assert len({s.context.trace_id for s in spans}) == 1
    assert sorted(s.name for s in spans if s.name.startswith("run obs.pack")) == [
        "run obs.pack", "run obs.pack"]


@step(x=input("x"))
def reserve_stock(inputs: Any, ctx: Any) -> int:
    return int(inputs.x)


@step(n=result("reserve"))
def notify(inputs: Any, ctx: Any) -> str:
    return f"notified {inputs.n}"


class Handed(Reactor, name="obs.handed"):
    x = Input(int)
    reserve = reserve_stock
    notify = notify
    returns = "notify"
    background = Background(after="reserve")


def test_a_run_handed_off_after_a_step_continues_its_trace_in_the_worker(
    telemetry: Telemetry, configure: Callable[..., Runtime],
) -> None:
    runtime = configure(telemetry.middleware)
    handle = Handed.run(x=2)
    assert Worker(runtime, liveness_wait=0.0).run_pending() == 1
    assert handle.wait(5) == Success("notified 2", run_id=handle.run_id)  # type: ignore[union-attr]
    spans = telemetry.spans()
    assert len({s.context.trace_id for s in spans}) == 1
    caller = _one(spans, "run obs.handed", **{"reactor.run.origin": "start"})
    assert caller.attributes["reactor.run.detail"] == "HandOff"
    assert [s.name for s in _children(spans, caller)] == ["step reserve", "job run"]
    worker_run = _one(spans, "run obs.handed", **{"reactor.run.origin": "worker"})
    assert worker_run.attributes["reactor.run.status"] == "completed"
    assert [s.name for s in _children(spans, worker_run)] == ["step notify"]
