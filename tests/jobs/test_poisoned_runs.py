"""A run whose ``run`` job fails on every delivery with an error of reactor's own is stored
``aborted`` when the job is dead-lettered, instead of being re-dispatched into the same error
by every sweep (reactor/jobs/poisoned_runs.py; docs/workers.md, "Dead letters")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Reactor, Retries, Timeouts, registry, step
from reactor.engine import step_runner
from reactor.errors import StorageError
from reactor.model.status import RunStatus
from reactor.testing import TestEnvironment


@pytest.fixture
def journal() -> Iterator[list[str]]:
    yield []
    for name in ("test_poisoned_runs.charge", "test_poisoned_runs.outage"):
        registry.unregister(name)


def _charging(journal: list[str], name: str) -> type[Reactor]:
    class Charging(Reactor, name=name):
        background = Background(all=True)

        @step()
        def reserve(inputs: Any, ctx: Any) -> str:
            journal.append("reserve")
            return "r-1"

        @reserve.undo
        def _release(result: Any, inputs: Any, ctx: Any) -> None:
            journal.append("release")

        @step(wait_for=["reserve"], timeouts=Timeouts(heartbeat=30),
              retries=Retries(max_attempts=3, backoff="fixed", base_delay=5))
        def charge(inputs: Any, ctx: Any) -> str:
            journal.append("charge")
            ctx.heartbeat({"page": 1})  # kept at the retry hand-off (_storable)
            raise ConnectionError("gateway down")  # a retry: the worker hands it off

    return Charging


def test_a_run_job_failing_on_every_delivery_is_stored_aborted_and_never_swept_again(
    journal: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:  # an engine bug at the retry hand-off
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(step_runner, "_storable", broken)
    with TestEnvironment() as env:
        flow = _charging(journal, "test_poisoned_runs.charge")
        handle = flow.run()
        assert isinstance(handle, DispatchHandle)
        env.run_until_idle()
        letters = env.dead_letters()
        assert len(letters) == 1 and "RecursionError" in letters[0].reason
        view = flow.find(handle.run_id)
        assert view.status is RunStatus.ABORTED
        assert view.failure is not None
        assert view.failure.exception_class == "reactor.errors.PoisonedRunError"
        assert "dead-lettered" in view.failure.message
        charges = journal.count("charge")
        env.sweep()
        env.run_until_idle()
        assert journal.count("charge") == charges  # no sweep runs it into the error again
        assert len(env.dead_letters()) == 1
        monkeypatch.undo()
        flow.undo(handle.run_id)  # the operator rolls it back
        assert flow.find(handle.run_id).status is RunStatus.CANCELLED
    assert journal.count("release") == 1


def test_a_run_job_dead_lettered_for_a_backend_error_is_left_to_the_sweeper(
    journal: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def outage(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("the store is down")

    monkeypatch.setattr(step_runner, "_storable", outage)
    with TestEnvironment() as env:
        flow = _charging(journal, "test_poisoned_runs.outage")
        handle = flow.run()
        assert isinstance(handle, DispatchHandle)
        env.run_until_idle()
        assert len(env.dead_letters()) == 1
        assert flow.find(handle.run_id).status is RunStatus.RUNNING  # an outage ends
