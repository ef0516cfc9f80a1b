"""A synchronous run whose checkpoint hits a storage outage (docs/workers.md, "Storage outages
during a synchronous run").

``Reactor.run`` raises the :class:`~reactor.errors.StorageError` with the run id as
``exc.run_id`` and in the message; the run stays at its last stored checkpoint (``running``),
its liveness lock is released, and one sweep plus one worker pass finish it: completed when its
steps succeed, failed and rolled back (every completed step undone once) when one fails. An
outage on the very first write leaves nothing stored: nothing ran and nothing is re-dispatched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Background, Input, Reactor, config, fail, input, result, step
from reactor.config import Runtime
from reactor.errors import RouterError, RunNotFoundError, StorageError
from reactor.jobs.sweep_tick import run_sweeps
from reactor.jobs.worker import Worker
from reactor.model.keys import run_liveness_key
from reactor.model.records import ContextDelta, ContextRecord
from reactor.model.results import Failure
from reactor.model.status import RunStatus

RAN: list[str] = []
UNDONE: list[str] = []


class OutageFlow(Reactor, name="tests.sync_outage.flow"):
    """Three steps; ``third`` fails when ``fail_third`` is set (then ``first`` and ``second``
    are undone)."""

    n = Input(int)
    fail_third = Input(bool, default=False)

    @step(n=input("n"))
    def first(inputs: Any, ctx: Any) -> int:
        RAN.append("first")
        return int(inputs.n) + 1

    @first.undo
    def _undo_first(value: Any, inputs: Any, ctx: Any) -> None:
        UNDONE.append("first")

    @step(v=result("first"))
    def second(inputs: Any, ctx: Any) -> int:
        RAN.append("second")
        return int(inputs.v) * 2

    @second.undo
    def _undo_second(value: Any, inputs: Any, ctx: Any) -> None:
        UNDONE.append("second")

    @step(v=result("second"), fail_third=input("fail_third"))
    def third(inputs: Any, ctx: Any) -> int:
        RAN.append("third")
        if inputs.fail_third:
            fail(RuntimeError("third refuses"), retryable=False)
        return int(inputs.v) + 100

    returns = "third"


class FlakySaves:
    """A context store whose save or append number ``fail_on`` (1-based) raises
    ``StorageError``; every other call goes to the real store."""

    def __init__(self, inner: Any, fail_on: int) -> None:
        self._inner = inner
        self.fail_on = fail_on
        self.saves = 0

    def save(self, record: ContextRecord, **fence: Any) -> Any:
        self.saves += 1
        if self.saves == self.fail_on:
            raise StorageError("injected outage saving a context")
        return self._inner.save(record, **fence)

    def append(self, delta: ContextDelta, **fence: Any) -> Any:
        self.saves += 1
        if self.saves == self.fail_on:
            raise StorageError("injected outage appending to a context")
        return self._inner.append(delta, **fence)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    RAN.clear()
    UNDONE.clear()
    rt = config.configure(storage="memory://", router="local://?workers=0")
    try:
        yield rt
    finally:
        config.reset()


def _outage(runtime: Runtime, fail_on: int, **inputs: Any) -> StorageError:
    flaky = FlakySaves(runtime.storage.contexts, fail_on)
    runtime.storage.contexts = flaky
    try:
        with pytest.raises(StorageError) as caught:
            OutageFlow.run(n=1, **inputs)
    finally:
        runtime.storage.contexts = flaky._inner
    return caught.value


def _recover(runtime: Runtime, run_id: str) -> None:
    """One sweep re-dispatches the run; one worker pass runs it to the end."""
    counts = run_sweeps(runtime)
    assert counts.runs is not None and counts.runs.redispatched == 1
    assert Worker(runtime, liveness_wait=0.0).run_pending() >= 1
    assert OutageFlow.find(run_id).status in (RunStatus.COMPLETED, RunStatus.FAILED)


# Saves of a 3-step run: 1 = the start (``running``), 2..4 = after each step (4, after the last
# step, is the final one: it stores the run ``completed``).
@pytest.mark.parametrize("fail_on", [2, 3, 4])
def test_the_error_names_the_run_and_the_sweeper_completes_it(
    runtime: Runtime, fail_on: int
) -> None:
    exc = _outage(runtime, fail_on)
    run_id = exc.run_id
    assert run_id is not None
    assert run_id in str(exc) and "injected outage" in str(exc)
    assert "tests.sync_outage.flow" in str(exc)
    assert OutageFlow.find(run_id).status is RunStatus.RUNNING
    assert not runtime.storage.locks.held(run_liveness_key(run_id))  # released, not lapsing
    ran_before = len(RAN)
    assert ran_before == min(fail_on - 1, 3)

    _recover(runtime, run_id)

    view = OutageFlow.find(run_id)
    assert view.status is RunStatus.COMPLETED
    assert view.results["third"] == 104
    # Steps after the last stored checkpoint ran again (at least once), the others did not.
    steps = ["first", "second", "third"]
    assert steps[:ran_before] + steps[max(fail_on - 2, 0):] == RAN
    assert UNDONE == []


# Saves of the failing run: 3 = after ``second``, 4 = the rollback intent after ``third``
# failed, 5 = after its (empty) compensate, 6 = after ``second`` was undone (the undo whose
# save failed runs again on resume: undo is at least once, like step bodies).
@pytest.mark.parametrize(
    ("fail_on", "ran", "undone"),
    [
        (3, ["first", "second", "second", "third"], ["second", "first"]),
        (4, ["first", "second", "third", "third"], ["second", "first"]),
        (6, ["first", "second", "third"], ["second", "second", "first"]),
    ],
)
def test_a_failing_run_is_rolled_back_after_the_outage(
    runtime: Runtime, fail_on: int, ran: list[str], undone: list[str]
) -> None:
    exc = _outage(runtime, fail_on, fail_third=True)
    assert exc.run_id is not None and exc.run_id in str(exc)

    _recover(runtime, exc.run_id)

    view = OutageFlow.find(exc.run_id)
    assert view.status is RunStatus.FAILED
    assert isinstance(view.failure, Failure) and view.failure.step_name == "third"
    assert not view.undo_stack and not view.failure.rollback_failures
    assert ran == RAN
    assert undone == UNDONE


def test_an_outage_on_the_first_write_leaves_nothing_to_recover(runtime: Runtime) -> None:
    exc = _outage(runtime, 1)
    assert exc.run_id is not None and exc.run_id in str(exc)
    with pytest.raises(RunNotFoundError):
        OutageFlow.find(exc.run_id)
    assert RAN == []
    counts = run_sweeps(runtime)
    assert counts.runs is not None and counts.runs.redispatched == 0


def test_a_storage_error_constructed_directly_has_no_run_id() -> None:
    assert StorageError("x").run_id is None
    assert StorageError("x", run_id="r1").run_id == "r1"


class HandedOff(Reactor, name="tests.sync_outage.handed_off"):
    """One step in the caller, the rest in a worker (a background hand-off after ``first``)."""

    n = Input(int)
    background = Background(after="first")

    @step(n=input("n"))
    def first(inputs: Any, ctx: Any) -> int:
        RAN.append("first")
        return int(inputs.n) + 1

    @step(v=result("first"))
    def second(inputs: Any, ctx: Any) -> int:
        RAN.append("second")
        return int(inputs.v) * 2

    returns = "second"


def test_a_hand_off_whose_enqueue_fails_names_the_stored_run_and_the_sweeper_finishes_it(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hand-off stored the run ``running`` before its enqueue failed: the ``RouterError``
    carries the run id (attribute and message), so the caller can find it, and one sweep plus
    one worker pass complete it without running ``first`` again."""
    def failing_enqueue(job: Any) -> str:
        raise RouterError("injected outage enqueueing a job")

    with monkeypatch.context() as patch:
        patch.setattr(runtime.router, "enqueue", failing_enqueue)
        with pytest.raises(RouterError) as caught:
            HandedOff.run(n=1)
    exc = caught.value
    assert exc.run_id is not None
    assert exc.run_id in str(exc) and "tests.sync_outage.handed_off" in str(exc)
    assert HandedOff.find(exc.run_id).status is RunStatus.RUNNING
    assert RAN == ["first"]
    counts = run_sweeps(runtime)
    assert counts.runs is not None and counts.runs.redispatched == 1
    assert Worker(runtime, liveness_wait=0.0).run_pending() >= 1
    view = HandedOff.find(exc.run_id)
    assert view.status is RunStatus.COMPLETED and view.results["second"] == 4
    assert RAN == ["first", "second"]


def test_a_router_error_constructed_directly_has_no_run_id() -> None:
    assert RouterError("x").run_id is None
    assert RouterError("x", run_id="r1").run_id == "r1"
