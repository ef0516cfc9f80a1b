"""Executor semantics: ordering, results, Halt vs Skipped, checkpoints (docs/concepts.md)."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import Reactor, Step
from reactor.config import Runtime
from reactor.dsl import (
    Input,
    input,
    result,
    step,
    value,
)
from reactor.model.records import ContextDelta, ContextRecord
from reactor.model.results import Failure, Halt, Skipped, Success
from reactor.model.signals import halt, skip, succeed
from reactor.model.status import RunStatus


def test_ready_steps_run_in_definition_order_batch_by_batch(events: list[str]) -> None:
    class R(Reactor):
        @step()
        def a(inputs: Any, ctx: Any) -> str:
            events.append("a")
            return "a"

        @step(x=result("a"))
        def c(inputs: Any, ctx: Any) -> str:
            events.append("c")
            return "c"

        @step()
        def b(inputs: Any, ctx: Any) -> str:
            events.append("b")
            return "b"

    r = R.run()
    assert isinstance(r, Success)
    # a and b are ready together (definition order: a, b); c only after a completed.
    assert events == ["a", "b", "c"]


def test_no_returns_gives_every_result_and_returns_picks_one() -> None:
    class All(Reactor):
        one = step(lambda inputs, ctx: 1)
        two = step(lambda inputs, ctx: 2)

    class One(Reactor):
        one = step(lambda inputs, ctx: 1)
        two = step(lambda inputs, ctx: inputs.x + 1, x=result("one"))
        returns = "two"

    assert All.run().value == {"one": 1, "two": 2}
    assert One.run().value == 2


def test_non_result_return_becomes_success_and_results_pass_through() -> None:
    class R(Reactor):
        plain = step(lambda inputs, ctx: {"k": 1})
        wrapped = step(lambda inputs, ctx: Success("w"))
        signalled = step(lambda inputs, ctx: succeed("s"))

    assert R.run().value == {"plain": {"k": 1}, "wrapped": "w", "signalled": "s"}


def test_halt_stops_without_rollback_and_stores_halted(events: list[str]) -> None:
    class R(Reactor):
        @step()
        def first(inputs: Any, ctx: Any) -> str:
            return "done"

        @first.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo first")

        @step(wait_for=["first"])
        def stop(inputs: Any, ctx: Any) -> None:
            halt("enough")

        @step(wait_for=["stop"])
        def never(inputs: Any, ctx: Any) -> None:
            events.append("never")

    r = R.run()
    assert isinstance(r, Halt)
    assert r.success and r.halted
    assert (r.reason, r.step_name) == ("enough", "stop")
    assert events == []
    view = R.find(r.run_id or "")
    assert view.status is RunStatus.HALTED
    assert view.results == {"first": "done"}
    assert [e.type for e in view.trace] == ["run", "halt"]


def test_skipped_value_flows_to_dependants_and_is_never_undone(events: list[str]) -> None:
    class R(Reactor):
        @step()
        def maybe(inputs: Any, ctx: Any) -> None:
            skip("default")

        @maybe.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo maybe")

        @step(x=result("maybe"))
        def use(inputs: Any, ctx: Any) -> None:
            events.append(f"use {inputs.x}")
            raise RuntimeError("boom")

    r = R.run()
    assert isinstance(r, Failure)
    assert events == ["use default"]  # never undone
    view = R.find(r.run_id or "")
    assert [e.type for e in view.trace][:2] == ["skipped", "failed"]


def test_skipped_run_status_stays_completed() -> None:
    class R(Reactor):
        s = step(lambda inputs, ctx: Skipped(3))

    r = R.run()
    assert type(r) is Success and r.value == {"s": 3}
    assert R.find(r.run_id or "").status is RunStatus.COMPLETED


class _Counting:
    """Wraps a context store to count saves and remember the statuses written."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.statuses: list[str] = []

    def save(self, record: ContextRecord, **fence: Any) -> None:
        self.statuses.append(record.status)
        self.inner.save(record, **fence)

    def append(self, delta: ContextDelta, **fence: Any) -> bool:
        self.statuses.append(delta.status)
        return bool(self.inner.append(delta, **fence))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_checkpoint_at_start_after_every_step_and_at_end(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = _Counting(runtime.storage.contexts)
    monkeypatch.setattr(runtime.storage, "contexts", counting)

    class R(Reactor):
        a = step(lambda inputs, ctx: 1)
        b = step(lambda inputs, ctx: 2)
        c = step(lambda inputs, ctx: 3)

    R.run()
    assert counting.statuses == ["running", "running", "running", "completed"]  # c completes it


def test_checkpoint_min_interval_throttles_step_checkpoints_only(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reactor import config

    throttled = config.configure(
        storage=runtime.storage, router=runtime.router, checkpoint_min_interval=3600.0
    )
    counting = _Counting(throttled.storage.contexts)
    monkeypatch.setattr(throttled.storage, "contexts", counting)

    class R(Reactor):
        a = step(lambda inputs, ctx: 1)
        b = step(lambda inputs, ctx: 2)

    R.run()
    assert counting.statuses == ["running", "completed"]


def test_step_context_exposes_run_identity_and_results() -> None:
    seen: dict[str, Any] = {}

    class R(Reactor, name="tests.engine.ctx_probe"):
        first = step(lambda inputs, ctx: 7)

        @step(wait_for=["first"])
        def probe(inputs: Any, ctx: Any) -> None:
            seen.update(
                run_id=ctx.run_id, reactor=ctx.reactor, step=ctx.step, attempt=ctx.attempt,
                first=ctx.results["first"], root=ctx.root_run_id,
            )

    r = R.run()
    assert seen == {
        "run_id": r.run_id, "reactor": "tests.engine.ctx_probe", "step": "probe",
        "attempt": 1, "first": 7, "root": r.run_id,
    }


def test_literal_values_and_by_name_wiring() -> None:
    class Add(Step):
        a = Input(int)
        b = Input(int)

        def run(self) -> int:
            return int(self.inputs.a + self.inputs.b)

    class R(Reactor):
        a = Input(int)
        total = step(Add, b=value(10))  # a is wired by name from the reactor input
        again = step(Add, a=result("total"), b=5)  # plain literals are value(...)
        returns = "again"

    assert R.run(a=1).value == 16


def test_unstorable_step_value_fails_the_step_and_compensates(events: list[str]) -> None:
    class Opaque:
        pass

    class R(Reactor):
        @step()
        def ok(inputs: Any, ctx: Any) -> int:
            return 1

        @ok.undo
        def _(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo ok")

        @step(wait_for=["ok"])
        def weird(inputs: Any, ctx: Any) -> Opaque:
            return Opaque()

        @weird.compensate
        def _c(error: Any, inputs: Any, ctx: Any) -> None:
            events.append("compensate weird")

    r = R.run()
    assert isinstance(r, Failure) and r.step_name == "weird"
    assert events == ["compensate weird", "undo ok"]
    assert R.find(r.run_id or "").status is RunStatus.FAILED


def test_reactor_inputs_reach_steps_validated() -> None:
    class R(Reactor):
        n = Input(int, ge=0)
        double = step(lambda inputs, ctx: inputs.n * 2, n=input("n"))

    assert R.run(n="4").value == {"double": 8}


def test_inputs_the_codec_cannot_store_fail_the_run_before_any_step(events: list[str]) -> None:
    class Opaque:
        pass

    class R(Reactor):
        thing = Input(Opaque)
        s = step(lambda inputs, ctx: events.append("ran"))

    r = R.run(thing=Opaque())
    assert isinstance(r, Failure) and not r.is_retryable
    assert "cannot encode" in r.message or "register" in r.message
    assert events == []
    view = R.find(r.run_id or "")
    assert view.status is RunStatus.FAILED and view.inputs == {"thing": "<unstorable>"}


def test_user_codec_registration_made_before_the_first_run_wins() -> None:
    from pydantic import BaseModel

    from reactor.model import codec

    class Parcel(BaseModel):
        weight: int

    class R(Reactor):
        parcel = Input(Parcel)
        s = step(lambda inputs, ctx: inputs.p.weight, p=input("parcel"))

    codec.register_model(Parcel, tag="tests.engine.Parcel")  # after the class, before a run
    try:
        r = R.run(parcel={"weight": 3})
        assert r.value == {"s": 3}
        assert codec.registered_tag(Parcel) == "tests.engine.Parcel"
    finally:
        codec.unregister(Parcel)
