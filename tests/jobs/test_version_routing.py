"""Routing by version: the compatibility check on an interrupt's expiry job, a map element's
own job and an ``async_reactor`` child's own job; workers announcing their definitions; a job
handed back to a worker that can continue its run; held runs resumed when such a worker
announces (docs/deploys.md, "Routing by version"; reactor/jobs/version_routing.py).

Each test starts runs under one release of a reactor name (``v1``) and hands their jobs to a
worker of another (``v2``, registered under the same name as a deploy would), as
tests/engine/test_compatibility.py does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import (
    Background,
    DispatchHandle,
    FanOut,
    Input,
    Reactor,
    async_reactor,
    config,
    element,
    input,
    interrupt,
    map_step,
    registry,
    result,
    step,
)
from reactor.config import Runtime
from reactor.dsl.fingerprint import definition_id
from reactor.engine.async_reactor import child_run_id
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.engine.maps.dispatcher import element_context_id
from reactor.jobs import announcements, version_routing
from reactor.jobs.announcements import Announcer, announce, announced, withdraw
from reactor.jobs.worker import Worker
from reactor.model.context import Context
from reactor.model.secrets import generate_key
from reactor.model.status import RunStatus
from reactor.testing import TestClock
from tests.backends import BACKENDS, configure_on, work_until

FLOW = "tests.version_routing.flow"
KID = "tests.version_routing.kid"
PARENT = "tests.version_routing.parent"
ITEM = "tests.version_routing.item"
ALL = (FLOW, KID, PARENT, ITEM)


def _cleanup() -> None:
    config.reset()
    for name in ALL:
        registry.unregister(name)


@pytest.fixture(params=["memory", "redis"])
def runtime(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on memory and Redis (a fresh namespace), on a test clock, with a secret
    key: a started worker refuses to serve reactors with secrets without one, and other test
    modules register such reactors at import."""
    clock = TestClock(time.time())
    yield configure_on(request.param, service_url, clock, area="routing",
                       secret_keys=generate_key())
    _cleanup()


@pytest.fixture(params=BACKENDS)
def any_backend(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on every backend (a fresh namespace), on a test clock."""
    clock = TestClock(time.time())
    yield configure_on(request.param, service_url, clock, area="routing")
    _cleanup()


# ------------------------------------------------------------------ releases


def _flow(events: list[str], *, with_a: bool = True, gate: bool = False) -> type[Reactor]:
    """A release of :data:`FLOW`: ``a`` (with an undo) feeds ``b``; a worker runs ``b``.
    ``with_a=False`` drops ``a`` (a completed step removed); ``gate=True``: ``b`` waits for
    an interrupt ``approval`` with a 1 s active expiry, all in the caller."""
    registry.unregister(FLOW)

    class Flow(Reactor, name=FLOW):
        background = None if gate else Background(before="b")
        if gate:
            approval = interrupt(wait_for="a" if with_a else None, timeout=1,
                                 expiry="active")
        order = Input(str)

        if with_a:
            @step(order=input("order"))
            def a(inputs: Any, ctx: Any) -> str:
                events.append("run a")
                return f"r-{inputs.order}"

            @a.undo
            def undo_a(result: Any, inputs: Any, ctx: Any) -> None:
                events.append("undo a")

        @step(reservation=result("a") if with_a else input("order"),
              wait_for=["approval"] if gate else None)
        def b(inputs: Any, ctx: Any) -> str:
            events.append(f"run b {inputs.reservation}")
            return "charged"

    return Flow


def _item(events: list[str], name: str, *, rewired: bool = False) -> type[Reactor]:
    """A release of the child reactor ``name``: ``x`` then ``y`` reading ``x``'s result;
    ``rewired=True``: ``y`` reads the input instead (``pending_step_rewired``)."""
    registry.unregister(name)

    class Item(Reactor, name=name):
        order = Input(str)

        @step(order=input("order"))
        def x(inputs: Any, ctx: Any) -> str:
            events.append(f"x {inputs.order}")
            return f"x-{inputs.order}"

        @step(value=input("order") if rewired else result("x"))
        def y(inputs: Any, ctx: Any) -> str:
            events.append(f"y {inputs.value}{' (v2)' if rewired else ''}")
            return f"y-{inputs.value}"

    return Item


def _work(runtime: Runtime, max_jobs: int = 1000) -> int:
    return Worker(runtime, liveness_wait=0.0).run_pending(max_jobs)


def _stored(runtime: Runtime, run_id: str) -> Context:
    stored = load_context(make_env(runtime), run_id, open_secrets=False)
    assert stored is not None
    return stored


def _advance(runtime: Runtime, seconds: float) -> None:
    clock = runtime.clock
    assert isinstance(clock, TestClock)
    clock.advance(seconds)


# ------------------------------------------------------------------ async_reactor child


def test_an_async_reactor_childs_own_job_is_judged(runtime: Runtime) -> None:
    """The child's run job under a release that rewired its pending ``y``: held, ``y`` never
    runs with the other wiring (today the child was stored without a definition and ran)."""
    events: list[str] = []
    kid_v1 = _item(events, KID)

    class Parent(Reactor, name=PARENT):
        background = Background(before="kid")
        order = Input(str)
        kid = async_reactor(kid_v1, args={"order": input("order")})

    handle = Parent.run(order="o-1")
    assert isinstance(handle, DispatchHandle)
    assert _work(runtime, max_jobs=1) == 1  # the parent's job: dispatches the child, parks
    child_id = child_run_id(handle.run_id, "kid")
    assert _stored(runtime, child_id).engine_state.definition == definition_id(
        kid_v1.definition)
    _item(events, KID, rewired=True)  # the new release of the child reactor
    _work(runtime)
    child = _stored(runtime, child_id)
    assert child.status is RunStatus.NEEDS_VERSION
    held = child.engine_state.needs_version
    assert held is not None
    assert (held.step, held.rule) == ("y", "pending_step_rewired")
    assert not any("(v2)" in e for e in events)


# ------------------------------------------------------------------ map element


def test_a_map_elements_own_job_is_judged_and_continues_under_its_release(
    runtime: Runtime,
) -> None:
    """An element stamped by v1 of its reactor meets a v2 worker: held ``needs_version``
    (the map waits, nothing of it runs); back under v1 its returning job runs it."""
    events: list[str] = []
    item_v1 = _item(events, ITEM)

    class Parent(Reactor, name=PARENT):
        background = Background(before="items")
        orders = Input(list)
        items = map_step(item_v1, source=input("orders"),
                         args={"order": element("items")}, fan_out=FanOut())

    handle = Parent.run(orders=["o-1"])
    assert isinstance(handle, DispatchHandle)
    assert _work(runtime, max_jobs=1) == 1  # the parent's job: dispatches the element
    parent = _stored(runtime, handle.run_id)
    ref = parent.map_ref("items")
    assert ref is not None
    element_id = element_context_id(ref.map_id, 0)
    _item(events, ITEM, rewired=True)
    _work(runtime)
    held = _stored(runtime, element_id)
    assert held.status is RunStatus.NEEDS_VERSION
    assert held.engine_state.needs_version is not None
    assert held.engine_state.needs_version.rule == "pending_step_rewired"
    assert events == []  # nothing ran under the other shape
    assert _stored(runtime, handle.run_id).status is RunStatus.RUNNING  # the map waits
    _item(events, ITEM)  # v1 is back: the element's job, brought back, runs it
    _advance(runtime, version_routing.HELD_ELEMENT_DELAY + 1)
    work_until(runtime, lambda: _stored(runtime, handle.run_id).status is RunStatus.COMPLETED)
    assert events == ["x o-1", "y x-o-1"]


# ------------------------------------------------------------------ interrupt expiry


def test_an_interrupts_expiry_job_is_judged_and_held_paused(runtime: Runtime) -> None:
    """The active-expiry job under a release without the completed step ``a``: nothing is
    claimed or rolled back here; the run is held with ``paused`` to go back to (today it was
    claimed, stored running, then held by its run job). Back under v1, resuming it
    re-enqueues the expiry, which rolls ``a`` back."""
    events: list[str] = []
    v1 = _flow(events, gate=True)
    paused = v1.run(order="o-1")
    run_id = paused.run_id
    assert _stored(runtime, run_id).status is RunStatus.PAUSED
    _flow(events, with_a=False, gate=True)
    _advance(runtime, 2)  # past the deadline (a remote router delivers after 1 s real time)
    work_until(runtime, lambda: _stored(runtime, run_id).status is not RunStatus.PAUSED)
    ctx = _stored(runtime, run_id)
    assert ctx.status is RunStatus.NEEDS_VERSION
    held = ctx.engine_state.needs_version
    assert held is not None
    assert (held.step, held.rule, held.status) == ("a", "completed_step_removed", "paused")
    assert ctx.engine_state.interrupt is not None  # still waiting at its interrupt
    assert events == ["run a"]
    v1 = _flow(events, gate=True)
    assert version_routing.resume_held(runtime) == 1
    assert _stored(runtime, run_id).status is RunStatus.PAUSED
    work_until(runtime, lambda: _stored(runtime, run_id).status is RunStatus.FAILED)
    assert events == ["run a", "undo a"]


# ------------------------------------------------------------------ announcements


def test_an_announcement_lives_for_its_lease_and_is_withdrawn(runtime: Runtime) -> None:
    storage = runtime.storage
    assert not announced(storage, FLOW, "0123456789abcdef")
    announce(storage, "w-1", {FLOW: "0123456789abcdef"}, lease=30)
    announce(storage, "w-2", {FLOW: "0123456789abcdef"}, lease=30)
    assert announced(storage, FLOW, "0123456789abcdef")
    assert not announced(storage, FLOW, "fedcba9876543210")
    withdraw(storage, "w-1", {FLOW: "0123456789abcdef"})
    assert announced(storage, FLOW, "0123456789abcdef")  # w-2 still announces it
    withdraw(storage, "w-2", {FLOW: "0123456789abcdef"})
    assert not announced(storage, FLOW, "0123456789abcdef")


def test_a_dead_workers_announcement_lapses_with_its_lease() -> None:
    clock = TestClock(time.time())
    from reactor.memory import LocalRouter, MemoryStorage

    runtime = config.configure(storage=MemoryStorage(clock=clock),
                               router=LocalRouter(clock=clock), clock=clock)
    try:
        announce(runtime.storage, "w-1", {FLOW: "0123456789abcdef"}, lease=30)
        clock.advance(29)
        assert announced(runtime.storage, FLOW, "0123456789abcdef")
        clock.advance(2)  # never renewed: the worker died
        assert not announced(runtime.storage, FLOW, "0123456789abcdef")
    finally:
        _cleanup()


def test_a_started_worker_announces_its_definitions_until_it_stops(runtime: Runtime) -> None:
    v1 = _flow([])
    fingerprint = definition_id(v1.definition).fingerprint
    worker = Worker(runtime, poll_seconds=0.1, liveness_wait=0.0)
    worker.start()
    try:
        limit = time.monotonic() + 30
        while not announced(runtime.storage, FLOW, fingerprint):  # the announcer's thread
            assert time.monotonic() < limit, "the worker never announced"
            time.sleep(0.05)
    finally:
        assert worker.stop(timeout=30)
    assert not announced(runtime.storage, FLOW, fingerprint)


def test_an_announcer_with_a_bad_lease_is_refused(runtime: Runtime) -> None:
    with pytest.raises(ValueError, match="lease"):
        Announcer(runtime, lease=0)


# ------------------------------------------------------------------ hand-back (every backend)


def test_a_job_is_handed_back_while_a_worker_of_its_release_is_announced(
    any_backend: Runtime,
) -> None:
    """A v2 worker hands a v1 run's job back (nothing stored changes) while a v1 worker is
    announced; a v1 worker then runs it."""
    runtime = any_backend
    events: list[str] = []
    v1 = _flow(events)
    fingerprint = definition_id(v1.definition).fingerprint
    announce(runtime.storage, "old-worker", {FLOW: fingerprint})
    run_id = v1.run(order="o-1").run_id
    _flow(events, with_a=False)  # this process is v2 now
    assert _work(runtime, max_jobs=1) == 1
    ctx = _stored(runtime, run_id)
    assert ctx.status is RunStatus.RUNNING and ctx.engine_state.needs_version is None
    assert events == ["run a"]
    _flow(events)  # a v1 worker receives the handed-back job
    _advance(runtime, version_routing.HAND_BACK_DELAY + 0.1)
    work_until(runtime, lambda: _stored(runtime, run_id).status is RunStatus.COMPLETED)
    assert events == ["run a", "run b r-o-1"]


def test_hand_backs_are_bounded_then_the_run_is_held(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(version_routing, "MAX_HAND_BACKS", 3)
    events: list[str] = []
    v1 = _flow(events)
    announce(runtime.storage, "old-worker", {FLOW: definition_id(v1.definition).fingerprint})
    run_id = v1.run(order="o-1").run_id
    _flow(events, with_a=False)
    work_until(runtime, lambda: (
        _advance(runtime, version_routing.HAND_BACK_DELAY + 0.1)
        or _stored(runtime, run_id).status is RunStatus.NEEDS_VERSION
    ))
    held = _stored(runtime, run_id).engine_state.needs_version
    assert held is not None and held.rule == "completed_step_removed"
    assert events == ["run a"]


def test_without_an_announced_worker_the_run_is_held_at_once(any_backend: Runtime) -> None:
    runtime = any_backend
    events: list[str] = []
    v1 = _flow(events)
    run_id = v1.run(order="o-1").run_id
    _flow(events, with_a=False)
    assert _work(runtime, max_jobs=1) == 1
    assert _stored(runtime, run_id).status is RunStatus.NEEDS_VERSION


def test_a_held_run_is_resumed_when_a_worker_of_its_release_announces(
    any_backend: Runtime,
) -> None:
    """The announcer's renewal resumes the held runs its definitions can continue and leaves
    the others alone."""
    runtime = any_backend
    events: list[str] = []
    v1 = _flow(events)
    run_id = v1.run(order="o-1").run_id
    _flow(events, with_a=False)
    _work(runtime)
    assert _stored(runtime, run_id).status is RunStatus.NEEDS_VERSION
    assert version_routing.resume_held(runtime) == 0  # v2 still cannot continue it
    assert _stored(runtime, run_id).status is RunStatus.NEEDS_VERSION
    _flow(events)  # a v1 worker starts: its first renewal resumes the run
    announcer = Announcer(runtime, on_renew=version_routing.resume_held)
    announcer.fingerprints = announcements.registered_fingerprints()
    announcer.renew()
    assert _stored(runtime, run_id).status is RunStatus.RUNNING
    work_until(runtime, lambda: _stored(runtime, run_id).status is RunStatus.COMPLETED)
    assert events == ["run a", "run b r-o-1"]
    announcer.stop()


def test_held_runs_no_worker_can_continue_do_not_starve_one_it_can(
    runtime: Runtime,
) -> None:
    """Each renewal looks at one page of held runs; it used to be always the first page, so
    a run this worker can continue that the scan lists after a page of runs it cannot was
    never resumed. Now each call pages on: every held run is looked at within
    ``ceil(held / limit)`` calls."""
    events: list[str] = []
    v1 = _flow(events)
    mine = v1.run(order="o-1").run_id
    _flow(events, with_a=False)
    _work(runtime)
    assert _stored(runtime, mine).status is RunStatus.NEEDS_VERSION
    registry.unregister(FLOW)

    class V0(Reactor, name=FLOW):  # a release nobody runs any more: ``z``, then ``b``
        background = Background(before="b")
        order = Input(str)

        @step(order=input("order"))
        def z(inputs: Any, ctx: Any) -> str:
            return "z"

        @z.undo
        def undo_z(result: Any, inputs: Any, ctx: Any) -> None:
            events.append("undo z")

        @step(reservation=input("order"))
        def b(inputs: Any, ctx: Any) -> str:
            return "b"

    blockers: list[str] = []
    while len(blockers) < 3 or min(blockers) > mine:  # some listed before ``mine``
        blockers.append(V0.run(order="o-0").run_id)
    _flow(events)  # v1 is back: it can continue ``mine``, not the v0 runs
    _work(runtime)
    assert {_stored(runtime, b).status for b in blockers} == {RunStatus.NEEDS_VERSION}
    assert _stored(runtime, mine).status is RunStatus.NEEDS_VERSION
    held = len(blockers) + 1
    resumed = sum(version_routing.resume_held(runtime, limit=1) for _ in range(held + 1))
    assert resumed == 1
    assert _stored(runtime, mine).status is RunStatus.RUNNING
    assert {_stored(runtime, b).status for b in blockers} == {RunStatus.NEEDS_VERSION}


def test_a_failing_resume_does_not_end_the_announcements(runtime: Runtime) -> None:
    """``on_renew`` raising anything but a ``ReactorError`` (a bug, a driver's own error)
    used to end the renewal thread: the announcement lapsed 30 s later and this worker's
    runs were held instead of handed to it."""
    calls: list[int] = []

    def broken(rt: Runtime) -> None:
        calls.append(1)
        raise KeyError("boom")

    _flow([])
    announcer = Announcer(runtime, on_renew=broken)
    announcer.fingerprints = announcements.registered_fingerprints()
    announcer.renew()  # logged, not raised
    announcer.renew()
    assert len(calls) == 2
    assert announced(runtime.storage, FLOW, announcer.fingerprints[FLOW])
    announcer.stop()
