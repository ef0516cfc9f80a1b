"""``on_failure="pause"``: a failed run held before its rollback (docs/operations.md, "Pause,
rewind, fork"; reactor/engine/run_control/failure_hold.py).

A held run is ``failed_paused``, keeps its results, undo stack and failure, holds no lock or
slot, and is resolved by rewind, fork or cancel; cancel rolls it back exactly as the failure
path would have (the failed step compensated, every completed step undone once).
"""

from __future__ import annotations

from typing import Any

import pytest

from reactor import Background, DispatchHandle, Reactor, with_lock
from reactor.dsl import step
from reactor.errors import DefinitionError, RunStateError
from reactor.model.results import Failure
from reactor.model.status import RunStatus
from reactor.testing import TestEnvironment
from tests.engine.recovery_reactors import Journal, chain


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("step_level", [False, True])
def test_a_failed_step_holds_the_run_before_any_rollback(kind: str, step_level: bool) -> None:
    journal = Journal()
    with TestEnvironment():
        flow = chain(journal, kind=kind, step_level=step_level)
        out = flow.run()
        assert isinstance(out, Failure) and out.step_name == "c"
        assert out.run_id is not None
        view = flow.find(out.run_id)
    assert view.status is RunStatus.FAILED_PAUSED
    assert journal.events == ["run a", "run b", "run c"]  # nothing compensated or undone
    assert list(view.undo_stack) == ["a", "b"]
    assert view.failure is not None and view.failure.step_name == "c"
    assert view.failure_hold is not None
    assert (view.failure_hold.step, view.failure_hold.compensate_pending) == ("c", True)
    assert view.failure_hold.attempt == 1  # no Retries: its one attempt
    assert view.current_step == "c"
    assert [e.type for e in view.trace][-2:] == ["failed", "failure_paused"]


def test_without_pause_the_run_rolls_back_as_before() -> None:
    journal = Journal()
    with TestEnvironment():
        flow = chain(journal, on_failure=None)
        out = flow.run()
        assert isinstance(out, Failure) and out.run_id is not None
        assert flow.find(out.run_id).status is RunStatus.FAILED
    assert journal.events == ["run a", "run b", "run c", "compensate c", "undo b", "undo a"]


def test_cancel_rolls_a_held_run_back_as_its_failure_would_have() -> None:
    journal = Journal()
    with TestEnvironment():
        flow = chain(journal)
        out = flow.run()
        assert isinstance(out, Failure) and out.run_id is not None
        cancelled = flow.cancel(out.run_id, reason="give up")
        assert isinstance(cancelled, Failure)
        again = flow.cancel(out.run_id)  # idempotent: nothing runs twice
        assert isinstance(again, Failure)
        view = flow.find(out.run_id)
    assert view.status is RunStatus.CANCELLED
    assert journal.events == ["run a", "run b", "run c", "compensate c", "undo b", "undo a"]
    assert view.failure_hold is None and list(view.undo_stack) == []


def test_a_held_run_past_its_deadline_is_rolled_back_and_failed() -> None:
    journal = Journal()
    with TestEnvironment() as env:
        flow = chain(journal)
        out = flow.run(deadline=60)
        assert isinstance(out, Failure) and out.run_id is not None
        env.clock.advance(61)
        env.run_until_idle()  # the deadline's timer job
        view = flow.find(out.run_id)
    assert view.status is RunStatus.FAILED
    assert view.failure is not None
    assert view.failure.exception_class == "reactor.errors.RunDeadlineExceeded"
    assert journal.events == ["run a", "run b", "run c", "compensate c", "undo b", "undo a"]


def test_a_held_run_holds_no_lock_and_refuses_other_operator_actions() -> None:
    journal = Journal()
    with TestEnvironment() as env:
        class Locked(Reactor):
            on_failure = "pause"
            coordination = with_lock(key="acct", auto_extend=False)

            @step()
            def post(inputs: Any, ctx: Any) -> str:
                journal.log("run post")
                raise RuntimeError("down")

        out = Locked.run()
        assert isinstance(out, Failure) and out.run_id is not None
        run_id = out.run_id
        assert not env.storage.locks.held("acct")  # released while held
        for refused in (
            lambda: Locked.suspend(run_id), lambda: Locked.undo(run_id),
            lambda: Locked.retry(run_id), lambda: Locked.cancel(run_id, rollback=False),
        ):
            with pytest.raises(RunStateError) as caught:
                refused()
            assert caught.value.status == "failed_paused"
        assert Locked.find(run_id).status is RunStatus.FAILED_PAUSED  # nothing changed


def test_a_background_run_is_held_in_its_worker_and_its_handle_returns_the_failure() -> None:
    journal = Journal()
    with TestEnvironment() as env:
        flow = chain(journal, handed=Background(all=True))
        handle = flow.run()
        assert isinstance(handle, DispatchHandle)
        env.run_until_idle()
        assert flow.find(handle.run_id).status is RunStatus.FAILED_PAUSED
        waited = handle.wait(timeout=5)
    assert isinstance(waited, Failure) and waited.step_name == "c"
    assert journal.events == ["run a", "run b", "run c"]


def test_on_failure_must_be_rollback_or_pause() -> None:
    with pytest.raises(DefinitionError, match="on_failure"):
        class Bad(Reactor):
            on_failure = "retry"  # type: ignore[assignment]

            @step()
            def a(inputs: Any, ctx: Any) -> None:
                return None
    with pytest.raises(DefinitionError, match="on_failure"):
        step(lambda inputs, ctx: None, on_failure="later")  # type: ignore[arg-type]


def _cancelled_while_failing(journal: Journal) -> type[Reactor]:
    """``a -> c``: ``c`` asks to cancel its own run, then fails (an operator's cancel that
    lands while the step runs)."""

    class CancelledWhileFailing(Reactor):
        on_failure = "pause"

        @step()
        def a(inputs: Any, ctx: Any) -> str:
            journal.log("run a")
            return "a"

        @a.undo
        def _undo_a(result: Any, inputs: Any, ctx: Any) -> None:
            journal.log("undo a")

        @step(wait_for=["a"])
        def c(inputs: Any, ctx: Any) -> str:
            journal.log("run c")
            if journal.broken:
                asked = CancelledWhileFailing.cancel(ctx.run_id, reason="stop it")
                assert isinstance(asked, DispatchHandle)  # accepted: the run is running
                raise RuntimeError("bug in c")
            return "c"

        @c.compensate
        def _compensate_c(error: Any, inputs: Any, ctx: Any) -> None:
            journal.log("compensate c")

    return CancelledWhileFailing


def test_a_cancel_requested_while_the_step_ran_is_honoured_instead_of_the_hold() -> None:
    """A cancel accepted while the failing step ran is not lost in the hold: the run rolls
    back at once (the failed step compensated, the completed one undone) instead of waiting
    ``failed_paused`` for an operator whose rewind would have dropped the compensate. Found
    by an outside attack; failed before the hold read the cancel request."""
    journal = Journal()
    with TestEnvironment():
        flow = _cancelled_while_failing(journal)
        out = flow.run()
        assert isinstance(out, Failure) and out.run_id is not None
        view = flow.find(out.run_id)
    assert view.status is RunStatus.FAILED
    assert journal.events == ["run a", "run c", "compensate c", "undo a"]
    assert view.failure_hold is None and list(view.undo_stack) == []


def test_a_rewind_is_refused_while_a_cancel_request_stands() -> None:
    """A held run whose cancel request stands (recorded, not carried out) is not rewound:
    rewinding would drop the failed step's pending compensate when the run then stops. The
    refusal changes nothing, and cancel rolls it back with the compensate."""
    from reactor.engine.env import make_env
    from reactor.engine.run_control.cancel import claim
    from reactor.model.engine_state import CancelRequest

    journal = Journal()
    with TestEnvironment() as env:
        flow = chain(journal)
        out = flow.run()
        assert isinstance(out, Failure) and out.run_id is not None
        run_id = out.run_id
        claim(make_env(), run_id, CancelRequest(reason="late", rollback=True,
                                                requested_at=env.clock.now()))
        journal.broken = False
        with pytest.raises(RunStateError, match="cancel request standing") as caught:
            flow.rewind(run_id)
        assert caught.value.status == "failed_paused"
        assert flow.find(run_id).status is RunStatus.FAILED_PAUSED
        assert journal.events == ["run a", "run b", "run c"]
        flow.cancel(run_id)
        view = flow.find(run_id)
    assert view.status is RunStatus.CANCELLED
    assert journal.events == ["run a", "run b", "run c", "compensate c", "undo b", "undo a"]
