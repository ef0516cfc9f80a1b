"""``Reactor.rewind`` and the undo rules (docs/operations.md, "Pause, rewind, fork";
docs/concepts.md, "Rollback"; reactor/engine/run_control/rewind.py).

Whatever happens after a hold, every completed step is undone at most once and none is
skipped: a rewind undoes the steps it runs again before running them, keeps the others; a
later rollback undoes what stands once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from reactor import Background, DispatchHandle, config
from reactor.config import Runtime
from reactor.engine.run_control.rewind import rewind
from reactor.errors import (
    DefinitionMismatchError,
    RewindArgumentError,
    RunNotFoundError,
    RunStateError,
)
from reactor.model.results import Failure, Success
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.testing import TestClock, TestEnvironment
from tests.backends import configure_on, work_until
from tests.engine.recovery_reactors import Journal, chain

RECOVERY_BACKENDS = ("memory", "redis", "mongodb", "dynamodb")


@pytest.fixture(params=RECOVERY_BACKENDS)
def runtime_on(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on each backend (a fresh namespace), on a test clock."""
    yield configure_on(request.param, service_url, TestClock(time.time()), area="rewind")
    config.reset()



def _held(flow: Any) -> str:
    out = flow.run()
    assert isinstance(out, Failure) and out.run_id is not None
    assert flow.find(out.run_id).status is RunStatus.FAILED_PAUSED
    return out.run_id


# ----------------------------------------------------------------------------- every backend


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_rewind_after_a_fixed_bug_completes_with_each_side_effect_once(
    runtime_on: Runtime, kind: str,
) -> None:
    journal = Journal()
    flow = chain(journal, kind=kind)
    run_id = _held(flow)
    journal.broken = False  # the bug is fixed
    out = flow.rewind(run_id, reason="fixed", by="ops")
    assert isinstance(out, Success)
    view = flow.find(run_id)
    assert view.status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c", "run c"]  # c again, a and b once
    assert list(view.undo_stack) == ["a", "b", "c"]
    assert [e.type for e in view.trace].count("rewound") == 1


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_rewind_from_an_earlier_step_undoes_what_it_reruns_once_then_cancel_undoes_the_rest(
    runtime_on: Runtime, kind: str,
) -> None:
    journal = Journal()
    flow = chain(journal, kind=kind)
    run_id = _held(flow)
    out = flow.rewind(run_id, from_step="b")  # still broken: held again at c
    assert isinstance(out, Failure)
    assert flow.find(run_id).status is RunStatus.FAILED_PAUSED
    cancelled = flow.cancel(run_id)
    assert isinstance(cancelled, Failure)
    assert journal.events == [
        "run a", "run b", "run c",
        "undo b", "run b", "run c",          # b undone before it ran again
        "compensate c", "undo b", "undo a",  # the rollback: what stands, once each
    ]
    for event in ("undo a", "compensate c"):
        assert journal.count(event) == 1
    assert journal.count("undo b") == journal.count("run b") == 2  # each run of b undone once


def test_rewind_of_a_background_run_goes_back_to_a_worker(runtime_on: Runtime) -> None:
    journal = Journal()
    flow = chain(journal, handed=Background(all=True))
    handle = flow.run()
    assert isinstance(handle, DispatchHandle)
    work_until(runtime_on, lambda: flow.find(handle.run_id).status is RunStatus.FAILED_PAUSED)
    journal.broken = False
    out = flow.rewind(handle.run_id)
    assert isinstance(out, DispatchHandle)  # a worker continues it
    work_until(runtime_on, lambda: flow.find(handle.run_id).status in TERMINAL_STATUSES)
    assert flow.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal.events == ["run a", "run b", "run c", "run c"]


def test_hostile_rewinds_are_refused_and_change_nothing(runtime_on: Runtime) -> None:
    journal = Journal()
    flow = chain(journal)
    run_id = _held(flow)
    before = flow.find(run_id)
    with pytest.raises(RunNotFoundError):
        flow.rewind("no-such-run")
    for bad, field in ((None, "run_id"), ("", "run_id")):
        with pytest.raises(RewindArgumentError) as caught:
            flow.rewind(bad)  # type: ignore[arg-type]
        assert caught.value.field == field
    with pytest.raises(RewindArgumentError) as caught:
        flow.rewind(run_id, from_step="nope")
    assert caught.value.field == "from_step" and "nope" in str(caught.value)
    with pytest.raises(RewindArgumentError) as caught:
        flow.rewind(run_id, reason="x" * 1001)
    assert caught.value.field == "reason"
    after = flow.find(run_id)
    assert (after.status, after.results, list(after.undo_stack), len(after.trace)) == (
        before.status, before.results, list(before.undo_stack), len(before.trace)
    )
    assert journal.events == ["run a", "run b", "run c"]


# ----------------------------------------------------------------------------- in memory


def test_a_run_that_is_not_held_cannot_be_rewound() -> None:
    journal = Journal()
    with TestEnvironment():
        flow = chain(journal, on_failure=None)
        failed = flow.run()
        assert isinstance(failed, Failure) and failed.run_id is not None
        journal.broken = False
        done = flow.run()
        assert isinstance(done, Success) and done.run_id is not None
        for run_id, status in ((failed.run_id, "failed"), (done.run_id, "completed")):
            with pytest.raises(RunStateError) as caught:
                flow.rewind(run_id)
            assert caught.value.status == status and "failed_paused" in str(caught.value)


def test_from_step_must_be_completed_or_the_failed_step() -> None:
    journal = Journal()
    with TestEnvironment():
        flow = chain(journal, step_level=True)  # only c pauses
        run_id = _held(flow)
        stored = flow.find(run_id)
        without_b = stored.results.copy()
        assert "b" in without_b
        with pytest.raises(RewindArgumentError, match="declares no such step"):
            flow.rewind(run_id, from_step="d")
        assert isinstance(flow.rewind(run_id, from_step="c"), Failure)  # the failed step
        assert journal.events == ["run a", "run b", "run c", "run c"]


def test_a_run_whose_definition_changed_is_refused_with_the_step_named() -> None:
    journal = Journal()
    with TestEnvironment():
        flow = chain(journal)
        run_id = _held(flow)
        old = flow.definition
        steps = {k: v for k, v in old.steps.items() if k != "a"}
        deps = {k: tuple(d for d in v if d != "a") for k, v in old.dependencies.items()
                if k != "a"}
        changed = replace(old, steps=steps, dependencies=deps)  # step a removed
        with pytest.raises(DefinitionMismatchError) as caught:
            rewind(changed, run_id)
        assert caught.value.step == "a" and caught.value.status == "failed_paused"
        assert "'a'" in str(caught.value)
        assert flow.find(run_id).status is RunStatus.FAILED_PAUSED
        assert journal.events == ["run a", "run b", "run c"]
