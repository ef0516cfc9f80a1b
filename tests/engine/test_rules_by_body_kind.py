"""Every engine rule, for every body kind, on memory and Redis (docs/concepts.md, "A
synchronous run", "Retries", "Rollback", "Async steps", "Concurrency", "Compose", "Inline map";
docs/run-control.md, "Interrupts", "Cancel").

"An async body obeys every rule of this page as a plain one does" (docs/concepts.md, "Async
steps"): each test below builds its reactors from one factory, :class:`Bodies`, that declares
the same step (its ``run``, ``undo`` and ``compensate`` log to a thread-safe list) either as
plain functions (``sync``), as ``async def`` functions (``async``) or alternating the two
within a reactor (``mixed``), and runs on the in-memory backend and on Redis. Every test
also checks that each body ran as the kind it was declared (an ``async def`` body on an event
loop, a plain one off any loop).

Nothing waits on real time: retry waits go to the runtime's :class:`TestClock` (recorded, never
slept), and overlap and completion order are forced with barriers and events, never timing.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import Reactor, Retries, Step, config
from reactor.config import Runtime
from reactor.dsl import Input, compose, element, input, interrupt, map_step, result, value
from reactor.dsl.declarations import StepSpec, step
from reactor.engine.branches import Branch, Branches
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.results import Failure, Halt, Paused, Success
from reactor.model.signals import fail, halt
from reactor.model.status import RunStatus
from reactor.testing import TestClock
from tests.backends import backend_urls

KINDS = ("sync", "async", "mixed")
BACKEND_NAMES = ("memory", "redis")
CANCELLED = "reactor.errors.RunCancelledError"

#: Seconds a barrier or event waits for its counterpart (only a broken run waits this long).
_MEET = 10.0

Core = Callable[[Any, Any], Any]


# ------------------------------------------------------------------------------ backends


class Backend:
    """One configured backend: its name, its runtime and the clock the runtime runs on."""

    def __init__(self, name: str, runtime: Runtime, clock: TestClock) -> None:
        self.name = name
        self.runtime = runtime
        self.clock = clock


@pytest.fixture(params=BACKEND_NAMES)
def backend(
    request: pytest.FixtureRequest, service_url: Callable[[str], str], runtime: Runtime
) -> Iterator[Backend]:
    """Replaces the engine tests' in-memory runtime (``runtime``) by one on ``memory`` or
    ``redis`` (a fresh namespace), on a :class:`TestClock` that records every wait."""
    clock = TestClock(time.time())
    name = request.param
    if name == "memory":
        configured = config.configure(storage=MemoryStorage(clock=clock),
                                      router=LocalRouter(clock=clock), clock=clock)
    else:
        storage_url, router_url = backend_urls(
            name, service_url, f"bk{uuid.uuid4().hex[:10]}", area="body_kind"
        )
        configured = config.configure(storage=storage_url, router=router_url, clock=clock)
    yield Backend(name, configured, clock)
    config.reset()


# ------------------------------------------------------------------------------ bodies


class Log:
    """A thread-safe event log (``"run a"``, ``"undo b@1"``, ``"compensate c"``)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self._lock = threading.Lock()

    def add(self, event: str) -> None:
        with self._lock:
            self.events.append(event)

    def count(self, event: str) -> int:
        with self._lock:
            return self.events.count(event)


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _where(ctx: Any) -> str:
    """``"@<index>"`` inside a map element, else ``""``."""
    index = ctx.element_index
    return "" if index is None else f"@{index}"


def _returns_name(name: str) -> Core:
    def core(inputs: Any, ctx: Any) -> Any:
        return name

    return core


class Bodies:
    """Declares steps of one body kind: every ``run``/``undo``/``compensate`` a plain function
    (``sync``), an ``async def`` function (``async``), or alternating per step, plain first
    (``mixed``). What the step does is the same ``core(inputs, ctx)`` in either form; a
    blocking ``gate()`` runs before it (an async body waits for it in a thread, so its loop
    stays free for the bodies it shares it with).

    Attributes:
        log: what ran, in order.
        declared: step name -> whether it was declared ``async def``.
        observed: ``(step, hook, ran on an event loop)`` for every body that ran.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.log = Log()
        self.declared: dict[str, bool] = {}
        self.observed: list[tuple[str, str, bool]] = []
        self._lock = threading.Lock()
        self._count = 0

    def _next_is_async(self) -> bool:
        if self.kind == "sync":
            return False
        if self.kind == "async":
            return True
        self._count += 1
        return self._count % 2 == 0

    def _saw(self, name: str, hook: str) -> None:
        with self._lock:
            self.observed.append((name, hook, _on_a_loop()))

    def step(
        self,
        name: str,
        core: Core | None = None,
        *,
        gate: Callable[[], None] | None = None,
        undo: bool = True,
        **declaration: Any,
    ) -> StepSpec:
        """A step ``name`` that logs ``run <name>``, then returns ``core(inputs, ctx)``
        (default: ``name``); its undo logs ``undo <name>``, its compensate ``compensate
        <name>`` (``@<index>`` appended inside a map element). ``declaration``: ``step()``'s
        keywords (arguments, ``wait_for``, ``retries``)."""
        is_async = self._next_is_async()
        self.declared[name] = is_async
        work = core or _returns_name(name)
        log = self.log
        if is_async:
            async def run(inputs: Any, ctx: Any) -> Any:
                self._saw(name, "run")
                await asyncio.sleep(0)
                if gate is not None:
                    await asyncio.to_thread(gate)
                log.add(f"run {name}{_where(ctx)}")
                return work(inputs, ctx)

            async def undo_it(value: Any, inputs: Any, ctx: Any) -> None:
                self._saw(name, "undo")
                await asyncio.sleep(0)
                log.add(f"undo {name}{_where(ctx)}")

            async def compensate_it(error: Any, inputs: Any, ctx: Any) -> None:
                self._saw(name, "compensate")
                await asyncio.sleep(0)
                log.add(f"compensate {name}{_where(ctx)}")
        else:
            def run(inputs: Any, ctx: Any) -> Any:
                self._saw(name, "run")
                if gate is not None:
                    gate()
                log.add(f"run {name}{_where(ctx)}")
                return work(inputs, ctx)

            def undo_it(value: Any, inputs: Any, ctx: Any) -> None:
                self._saw(name, "undo")
                log.add(f"undo {name}{_where(ctx)}")

            def compensate_it(error: Any, inputs: Any, ctx: Any) -> None:
                self._saw(name, "compensate")
                log.add(f"compensate {name}{_where(ctx)}")

        run.__name__ = run.__qualname__ = f"run_{name}"
        spec = step(run, **declaration)
        if undo:
            spec.undo(undo_it)
        spec.compensate(compensate_it)
        return spec

    def validated(self, name: str) -> type[Step]:
        """A ``Step`` class of this kind whose input ``amount`` must be a positive int (its
        run, undo and compensate log as :meth:`step`'s do)."""
        is_async = self._next_is_async()
        self.declared[name] = is_async
        bodies, log = self, self.log
        if is_async:
            class AsyncValidated(Step):
                amount = Input(int, gt=0)

                async def run(self) -> int:
                    bodies._saw(name, "run")
                    log.add(f"run {name}")
                    return int(self.inputs.amount)

                async def undo(self) -> None:
                    bodies._saw(name, "undo")
                    log.add(f"undo {name}")

                async def compensate(self) -> None:
                    bodies._saw(name, "compensate")
                    log.add(f"compensate {name}")

            return AsyncValidated

        class Validated(Step):
            amount = Input(int, gt=0)

            def run(self) -> int:
                bodies._saw(name, "run")
                log.add(f"run {name}")
                return int(self.inputs.amount)

            def undo(self) -> None:
                bodies._saw(name, "undo")
                log.add(f"undo {name}")

            def compensate(self) -> None:
                bodies._saw(name, "compensate")
                log.add(f"compensate {name}")

        return Validated

    def check_kinds(self) -> None:
        """Every body ran as declared (``async def`` on a loop, plain off any loop), and the
        reactors were of this kind (``mixed``: both kinds declared)."""
        assert self.observed, "no body ran"
        for name, hook, on_loop in self.observed:
            assert on_loop is self.declared[name], (name, hook, on_loop)
        kinds = set(self.declared.values())
        expected = {"sync": {False}, "async": {True}, "mixed": {False, True}}[self.kind]
        assert kinds == expected, (self.kind, self.declared)


@pytest.fixture(params=KINDS)
def bodies(request: pytest.FixtureRequest) -> Bodies:
    """The step factory of one body kind (``sync``, ``async`` or ``mixed``)."""
    return Bodies(request.param)


def _view(reactor: Any, outcome: Any) -> Any:
    assert outcome.run_id, outcome
    return reactor.find(outcome.run_id)


def _trace(view: Any, kind: str, step_name: str) -> list[Any]:
    return [e for e in view.trace if e.type == kind and e.step == step_name]


# ------------------------------------------------------------------------------ 1. a run


def test_a_completed_run_passes_results_along_and_is_stored_completed(
    backend: Backend, bodies: Bodies
) -> None:
    class Order(Reactor):
        sku = Input(str)
        reserve = bodies.step(
            "reserve", lambda i, c: {"sku": i.sku, "qty": 2}, sku=input("sku")
        )
        price = bodies.step("price", lambda i, c: i.qty * 10, qty=result("reserve", "qty"))
        receipt = bodies.step(
            "receipt", lambda i, c: f"{i.sku} x{i.qty} = {i.total}",
            sku=result("reserve", "sku"), qty=result("reserve", ["qty"]), total=result("price"),
        )
        returns = "receipt"

    out = Order.run(sku="tea")
    assert isinstance(out, Success) and not isinstance(out, Halt), out
    assert out.value == "tea x2 = 20"
    assert bodies.log.events == ["run reserve", "run price", "run receipt"]
    view = _view(Order, out)
    assert view.status is RunStatus.COMPLETED
    assert dict(view.results) == {
        "reserve": {"sku": "tea", "qty": 2}, "price": 20, "receipt": "tea x2 = 20",
    }
    bodies.check_kinds()


# ------------------------------------------------------------------------------ 2. rollback


def _raise(message: str) -> Core:
    def core(inputs: Any, ctx: Any) -> Any:
        raise RuntimeError(message)

    return core


def test_a_failure_compensates_the_failing_step_and_undoes_the_rest_by_completion_order(
    backend: Backend, bodies: Bodies
) -> None:
    """Two independent chains (left1 -> left2, right1 -> right2) run wave by wave, so the
    completion order (left1, right1, left2, right2) differs from the declaration order
    (left1, left2, right1, right2): the rollback follows the completion order."""

    class Fork(Reactor):
        left1 = bodies.step("left1")
        left2 = bodies.step("left2", prev=result("left1"))
        right1 = bodies.step("right1")
        right2 = bodies.step("right2", prev=result("right1"))
        boom = bodies.step("boom", _raise("card declined"), wait_for=["left2", "right2"])

    out = Fork.run()
    assert isinstance(out, Failure), out
    assert out.step_name == "boom" and "card declined" in out.message
    assert bodies.log.events == [
        "run left1", "run right1", "run left2", "run right2", "run boom",
        "compensate boom",  # the failing step: compensated, never undone
        "undo right2", "undo left2", "undo right1", "undo left1",
    ]
    view = _view(Fork, out)
    assert view.status is RunStatus.FAILED and view.undo_stack == ()
    assert [e.step for e in view.trace if e.type == "undo"] == [
        "right2", "left2", "right1", "left1",
    ]
    assert [e.step for e in view.trace if e.type == "compensate"] == ["boom"]
    bodies.check_kinds()


def test_a_step_failing_before_its_body_is_not_compensated(
    backend: Backend, bodies: Bodies
) -> None:
    """An argument that cannot be resolved and an input the step's contract refuses fail the
    step before its body starts: nothing to compensate, the completed steps are undone."""

    class BadArgument(Reactor):
        first = bodies.step("first", lambda i, c: {"id": 1})
        second = bodies.step("second", missing=result("first", "no_such_key"))

    class BadInput(Reactor):
        first = bodies.step("first")
        second = step(bodies.validated("second"), amount=value(-5))

    out = BadArgument.run()
    assert isinstance(out, Failure) and out.step_name == "second", out
    assert not out.retryable
    assert bodies.log.events == ["run first", "undo first"]
    view = _view(BadArgument, out)
    assert view.status is RunStatus.FAILED
    assert _trace(view, "compensate", "second") == []

    bodies.log.events.clear()
    refused = BadInput.run()
    assert isinstance(refused, Failure) and refused.step_name == "second", refused
    assert not refused.retryable
    assert list(refused.validation_errors) == ["amount"]
    assert bodies.log.events == ["run first", "undo first"]
    refused_view = _view(BadInput, refused)
    assert refused_view.status is RunStatus.FAILED
    assert _trace(refused_view, "compensate", "second") == []
    bodies.check_kinds()


# ------------------------------------------------------------------------------ 3. retries


def test_retries_wait_on_the_runtime_clock_and_count_attempts(
    backend: Backend, bodies: Bodies
) -> None:
    def flaky(inputs: Any, ctx: Any) -> str:
        if ctx.attempt < 3:
            raise ConnectionError(f"gateway busy ({ctx.attempt})")
        return f"ok after {ctx.attempt}"

    class Flaky(Reactor):
        first = bodies.step("first")
        call = bodies.step(
            "call", flaky, wait_for=["first"],
            retries=Retries(max_attempts=3, backoff="fixed", base_delay=5),
        )
        returns = "call"

    out = Flaky.run()
    assert isinstance(out, Success), out
    assert out.value == "ok after 3"
    assert backend.clock.sleeps == [5.0, 5.0]  # taken on the runtime clock, never slept
    assert bodies.log.events == ["run first", "run call", "run call", "run call"]
    view = _view(Flaky, out)
    assert view.status is RunStatus.COMPLETED
    assert [e.attempt for e in _trace(view, "retry", "call")] == [1, 2]
    assert [e.attempt for e in _trace(view, "run", "call")] == [3]
    assert _trace(view, "compensate", "call") == []
    bodies.check_kinds()


def test_a_failure_that_is_not_retryable_stops_at_once(
    backend: Backend, bodies: Bodies
) -> None:
    def declined(inputs: Any, ctx: Any) -> None:
        fail("card declined", retryable=False)

    class Declined(Reactor):
        first = bodies.step("first")
        call = bodies.step(
            "call", declined, wait_for=["first"],
            retries=Retries(max_attempts=3, backoff="fixed", base_delay=5),
        )

    out = Declined.run()
    assert isinstance(out, Failure) and out.step_name == "call", out
    assert "card declined" in out.message and not out.retryable
    assert backend.clock.sleeps == []
    assert bodies.log.events == ["run first", "run call", "compensate call", "undo first"]
    view = _view(Declined, out)
    assert view.status is RunStatus.FAILED
    assert _trace(view, "retry", "call") == []
    bodies.check_kinds()


# ------------------------------------------------------------------------------ 4. halt


def test_a_halt_stops_the_run_without_rollback(backend: Backend, bodies: Bodies) -> None:
    def out_of_stock(inputs: Any, ctx: Any) -> None:
        halt("out of stock")

    class Halts(Reactor):
        first = bodies.step("first")
        stop = bodies.step("stop", out_of_stock, wait_for=["first"])
        after = bodies.step("after", wait_for=["stop"])

    out = Halts.run()
    assert isinstance(out, Halt) and out.step_name == "stop", out
    assert "out of stock" in str(out.reason)
    assert bodies.log.events == ["run first", "run stop"]  # nothing undone, after never ran
    view = _view(Halts, out)
    assert view.status is RunStatus.HALTED
    assert view.undo_stack == ("first",)
    assert [e.step for e in view.trace if e.type == "halt"] == ["stop"]
    bodies.check_kinds()


# ------------------------------------------------------------------------------ 5. interrupt


def test_an_interrupt_pauses_the_run_and_a_resume_completes_it(
    backend: Backend, bodies: Bodies
) -> None:
    class Refund(Reactor):
        order_id = Input(str)
        reserve = bodies.step("reserve", lambda i, c: f"hold-{i.order_id}",
                              order_id=input("order_id"))
        approval = interrupt(wait_for="reserve")
        pay = bodies.step(
            "pay", lambda i, c: f"paid {i.hold}, approved by {i.approval['approver']}",
            hold=result("reserve"), approval=result("approval"),
        )
        returns = "pay"

    paused = Refund.run(order_id="o-1")
    assert isinstance(paused, Paused) and not paused.success, paused
    assert paused.step == "approval"
    assert bodies.log.events == ["run reserve"]
    assert _view(Refund, paused).status is RunStatus.PAUSED

    done = Refund.resume(paused.run_id, payload={"approver": "ann"})
    assert isinstance(done, Success), done
    assert done.run_id == paused.run_id
    assert done.value == "paid hold-o-1, approved by ann"
    assert bodies.log.events == ["run reserve", "run pay"]
    view = _view(Refund, done)
    assert view.status is RunStatus.COMPLETED
    assert view.results["approval"] == {"approver": "ann"}
    bodies.check_kinds()


# ------------------------------------------------------------------------------ 6. cancel


def test_cancelling_a_paused_run_undoes_its_steps_newest_first(
    backend: Backend, bodies: Bodies
) -> None:
    class Hold(Reactor):
        seat = bodies.step("seat")
        meal = bodies.step("meal", wait_for=["seat"])
        answer = interrupt(wait_for="meal")
        pay = bodies.step("pay", wait_for=["answer"])

    paused = Hold.run()
    assert isinstance(paused, Paused), paused
    run_id = paused.run_id or ""
    outcome = Hold.cancel(run_id, reason="no answer")
    assert isinstance(outcome, Failure), outcome
    assert outcome.exception_class == CANCELLED and "no answer" in outcome.message
    assert outcome.rollback_failures == []
    assert bodies.log.events == ["run seat", "run meal", "undo meal", "undo seat"]
    view = Hold.find(run_id)
    assert view.status is RunStatus.CANCELLED and view.undo_stack == ()
    assert view.cancel is not None and view.cancel.reason == "no answer"
    assert Hold.cancel(run_id).message == outcome.message  # again: nothing undone twice
    assert bodies.log.events == ["run seat", "run meal", "undo meal", "undo seat"]
    bodies.check_kinds()


# ------------------------------------------------------------------------------ 7. compose


def test_a_failure_after_a_compose_undoes_the_childs_steps_newest_first(
    backend: Backend, bodies: Bodies
) -> None:
    class Payment(Reactor):
        amount = Input(int)
        authorize = bodies.step("authorize", lambda i, c: f"auth-{i.amount}",
                                amount=input("amount"))
        capture = bodies.step("capture", lambda i, c: f"cap-{i.auth}",
                              auth=result("authorize"))
        returns = "capture"

    class Checkout(Reactor):
        reserve = bodies.step("reserve", lambda i, c: 7)
        payment = compose(Payment, amount=result("reserve"))
        ship = bodies.step("ship", _raise("no courier"), captured=result("payment"))

    out = Checkout.run()
    assert isinstance(out, Failure) and out.step_name == "ship", out
    assert bodies.log.events == [
        "run reserve", "run authorize", "run capture", "run ship",
        "compensate ship",
        "undo capture", "undo authorize", "undo reserve",
    ]
    view = _view(Checkout, out)
    assert view.status is RunStatus.FAILED
    assert view.children["payment"].results["capture"] == "cap-auth-7"
    bodies.check_kinds()


# ------------------------------------------------------------------------------ 8. inline map


def test_a_failure_after_an_inline_map_undoes_every_elements_steps(
    backend: Backend, bodies: Bodies
) -> None:
    class Line(Reactor):
        sku = Input(str)
        reserve = bodies.step("reserve", lambda i, c: f"res-{i.sku}", sku=input("sku"))
        label = bodies.step("label", lambda i, c: f"lbl-{i.res}", res=result("reserve"))
        returns = "label"

    class Order(Reactor):
        skus = Input(list)
        open = bodies.step("open")
        lines = map_step(Line, source=input("skus"), args={"sku": element("lines")},
                         wait_for=["open"])
        ship = bodies.step("ship", _raise("no courier"), labels=result("lines"))

    out = Order.run(skus=["a", "b", "c"])
    assert isinstance(out, Failure) and out.step_name == "ship", out
    ran = [f"run {name}@{i}" for i in range(3) for name in ("reserve", "label")]
    undone = [f"undo {name}@{i}" for i in (2, 1, 0) for name in ("label", "reserve")]
    assert bodies.log.events == [
        "run open", *ran, "run ship", "compensate ship", *undone, "undo open",
    ]
    view = _view(Order, out)
    assert view.status is RunStatus.FAILED
    bodies.check_kinds()


def test_a_completed_inline_map_returns_each_elements_value(
    backend: Backend, bodies: Bodies
) -> None:
    class Line(Reactor):
        sku = Input(str)
        reserve = bodies.step("reserve", lambda i, c: f"res-{i.sku}", sku=input("sku"))
        label = bodies.step("label", lambda i, c: f"lbl-{i.res}", res=result("reserve"))
        returns = "label"

    class Order(Reactor):
        skus = Input(list)
        lines = map_step(Line, source=input("skus"), args={"sku": element("lines")})
        returns = "lines"

    out = Order.run(skus=["a", "b"])
    assert isinstance(out, Success), out
    assert list(out.value) == ["lbl-res-a", "lbl-res-b"]
    assert bodies.log.events == [
        "run reserve@0", "run label@0", "run reserve@1", "run label@1",
    ]
    assert _view(Order, out).status is RunStatus.COMPLETED
    bodies.check_kinds()


# ------------------------------------------------------------------------------ 9. concurrency


class _Recorded:
    """Sets an event per step once the executor collected that step's settled branch (so it
    records it before anything collected later): completion order made deterministic."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
        self.events = {name: threading.Event() for name in names}
        real_wait = Branches.wait
        probe = self

        def wait(group: Branches) -> list[Branch]:
            settled = real_wait(group)
            for branch in settled:
                if branch.name in probe.events:
                    probe.events[branch.name].set()
            return settled

        monkeypatch.setattr(Branches, "wait", wait)

    def waiter(self, name: str) -> Callable[[], None]:
        def gate() -> None:
            assert self.events[name].wait(_MEET), f"{name} was never recorded"

        return gate


def test_independent_steps_overlap_and_a_failing_branch_rolls_back_by_completion_order(
    backend: Backend, bodies: Bodies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``left`` and ``right`` meet at a barrier (they run at the same time, or both break);
    ``left`` then returns only once ``right`` was recorded, and ``boom`` fails only once
    ``left`` was: completion order right, left, boom, the reverse of declaration order, so
    the rollback (left, then right) shows it follows completion, not declaration."""
    meet = threading.Barrier(2)
    recorded = _Recorded(monkeypatch, "left", "right")

    def left_gate() -> None:
        meet.wait(_MEET)
        recorded.waiter("right")()

    class Fork(Reactor):
        max_concurrency = 3
        left = bodies.step("left", gate=left_gate)
        right = bodies.step("right", gate=lambda: meet.wait(_MEET))
        boom = bodies.step("boom", _raise("card declined"), gate=recorded.waiter("left"))

    out = Fork.run()
    assert isinstance(out, Failure) and out.step_name == "boom", out
    assert "card declined" in out.message
    assert bodies.log.events == [
        "run right", "run left", "run boom",
        "compensate boom", "undo left", "undo right",
    ]
    view = _view(Fork, out)
    assert view.status is RunStatus.FAILED
    runs = [e for e in view.trace if e.type == "run"]
    assert [e.step for e in runs] == ["right", "left"]
    assert all(e.started is not None for e in runs)
    assert [e.step for e in view.trace if e.type == "undo"] == ["left", "right"]
    bodies.check_kinds()


def test_independent_steps_overlap_and_the_dependent_one_runs_after_them(
    backend: Backend, bodies: Bodies
) -> None:
    meet = threading.Barrier(2)

    class Checkout(Reactor):
        max_concurrency = 3
        reserve = bodies.step("reserve", gate=lambda: meet.wait(_MEET))
        authorise = bodies.step("authorise", gate=lambda: meet.wait(_MEET))
        confirm = bodies.step("confirm", lambda i, c: f"{i.r}+{i.a}",
                              r=result("reserve"), a=result("authorise"))
        returns = "confirm"

    out = Checkout.run()
    assert isinstance(out, Success), out
    assert out.value == "reserve+authorise"
    assert sorted(bodies.log.events[:2]) == ["run authorise", "run reserve"]
    assert bodies.log.events[2:] == ["run confirm"]
    assert _view(Checkout, out).status is RunStatus.COMPLETED
    bodies.check_kinds()
