"""Durable sleep (docs/schedules.md, "Durable sleep"): a ``sleep`` step parks the run
``paused`` with a sleep marker, holding no lock, and a ``sleep_wake`` timer job (or the
sweeper, when the timer was lost) wakes it at its wake time; cancel and the run deadline stop
a sleeping run; bad values are refused at definition and fail the step at run time; a sleep
reached after its wake time completes at once. Memory through the testing kit, and every
backend of tests/backends.py for the timer and the sweeper.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reactor import DispatchHandle, Input, Reactor, Success, config, sleep, step
from reactor.config import Runtime
from reactor.engine import sleeps
from reactor.errors import DefinitionError
from reactor.jobs.sweep_tick import run_sweeps
from reactor.jobs.worker import Worker
from reactor.model.status import RunStatus
from reactor.ports.payloads import SleepWakePayload
from reactor.testing import TestClock, TestEnvironment
from tests.backends import BACKENDS, configure_on, work_until

START = 1_700_000_000.0
TWO_HOURS = 2 * 3600.0


def _napper(journal: list[str], **options: Any) -> type[Reactor]:
    class Napper(Reactor):
        wake = Input(Any, default=None)

        @step()
        def first(inputs: Any, ctx: Any) -> str:
            journal.append("first")
            return "one"

        @first.undo
        def _undo_first(result: Any, inputs: Any, ctx: Any) -> None:
            journal.append("undo first")

        nap = sleep(wait_for="first", **options)

        @step(wait_for="nap")
        def second(inputs: Any, ctx: Any) -> str:
            journal.append("second")
            return "two"

    return Napper


def test_a_two_hour_sleep_resumes_at_its_wake_time_and_not_before() -> None:
    journal: list[str] = []
    with TestEnvironment(start=START) as env:
        Napper = _napper(journal, seconds=TWO_HOURS)
        handle = Napper.run()
        assert isinstance(handle, DispatchHandle)
        env.run_pending()
        view = Napper.find(handle.run_id)
        assert view.status is RunStatus.PAUSED
        assert view.sleeping_until == START + TWO_HOURS
        assert view.waiting_for == "sleeping until 2023-11-15T00:13:20+00:00 (step 'nap')"
        assert env.storage.locks.held(f"async:{handle.run_id}") is False
        env.clock.advance(TWO_HOURS - 1)
        assert Napper.find(handle.run_id).status is RunStatus.PAUSED
        assert journal == ["first"]
        env.clock.advance(1)
        env.run_pending()
        view = Napper.find(handle.run_id)
    assert view.status is RunStatus.COMPLETED
    assert view.sleeping_until is None
    assert journal == ["first", "second"]


def test_cancel_rolls_back_a_sleeping_run() -> None:
    journal: list[str] = []
    with TestEnvironment(start=START) as env:
        Napper = _napper(journal, seconds=TWO_HOURS)
        handle = Napper.run()
        env.run_pending()
        Napper.cancel(handle.run_id)
        env.run_until_idle()
        env.clock.advance(TWO_HOURS)
        env.run_until_idle()
        view = Napper.find(handle.run_id)
    assert view.status is RunStatus.CANCELLED
    assert journal == ["first", "undo first"]


def test_a_deadline_passing_during_the_sleep_stops_the_run() -> None:
    journal: list[str] = []
    with TestEnvironment(start=START) as env:
        Napper = _napper(journal, seconds=TWO_HOURS)
        handle = Napper.run(deadline=600)
        env.clock.advance(600)
        env.run_pending()
        view = Napper.find(handle.run_id)
        assert view.status is RunStatus.FAILED
        assert view.failure is not None
        assert view.failure.exception_class == "reactor.errors.RunDeadlineExceeded"
        env.run_until_idle()
    assert journal == ["first", "undo first"]


@pytest.mark.parametrize("options", [
    {"seconds": 0}, {"seconds": -5}, {"seconds": math.inf}, {"seconds": math.nan},
    {"seconds": True}, {"seconds": "60"}, {"until": datetime(2030, 1, 1)},
    {"seconds": 1e12}, {"seconds": 1e300},
    {}, {"seconds": 5, "until": datetime(2030, 1, 1, tzinfo=UTC)}, {"from_input": " "},
])
def test_bad_options_are_refused_at_definition(options: dict[str, Any]) -> None:
    with pytest.raises(DefinitionError, match=r"sleep\("):
        sleep(**options)


def test_a_from_input_naming_no_declared_input_is_refused_at_definition() -> None:
    # found by attack: the reactor was created and every run failed at the sleep, after its
    # earlier steps ran and were undone (an input('nope') reference is refused at once)
    with pytest.raises(DefinitionError, match=r"from_input='nope'.*no declared reactor input"):
        class Dreamer(Reactor):
            wake = Input(str)

            nap = sleep(from_input="nope")

            @step(wait_for="nap")
            def act(inputs: Any, ctx: Any) -> str:
                return "done"


@pytest.mark.parametrize("wake", [
    -3, "tomorrow", "2030-01-01T00:00:00", [1],
    1e12, datetime.max.replace(tzinfo=UTC),  # past ten years: a wake time no view can show
])
def test_a_bad_value_read_at_run_time_fails_the_step(wake: Any) -> None:
    journal: list[str] = []
    with TestEnvironment(start=START):
        Napper = _napper(journal, from_input="wake")
        result = Napper.run(wake=wake)
    assert result.failed
    assert result.error is not None and "wake" in str(result.error)
    assert type(result.error).__name__ == "SleepValueError"
    assert journal == ["first", "undo first"]


@pytest.mark.parametrize("wake", [
    "2023-11-14T22:13:20+00:00", datetime.fromtimestamp(START, UTC) - timedelta(hours=1),
])
def test_a_sleep_reached_after_its_wake_time_completes_at_once(wake: Any) -> None:
    journal: list[str] = []
    with TestEnvironment(start=START):
        Napper = _napper(journal, from_input="wake")
        result = Napper.run(wake=wake)
    assert isinstance(result, Success)
    assert journal == ["first", "second"]


def test_a_wake_time_from_the_input_is_honoured() -> None:
    journal: list[str] = []
    with TestEnvironment(start=START) as env:
        Napper = _napper(journal, from_input="wake")
        handle = Napper.run(wake=datetime.fromtimestamp(START + 90, UTC).isoformat())
        assert isinstance(handle, DispatchHandle)
        env.run_pending()
        assert Napper.find(handle.run_id).sleeping_until == START + 90
        env.clock.advance(90)
        env.run_pending()
        assert Napper.find(handle.run_id).status is RunStatus.COMPLETED


def test_a_lost_timer_job_is_recovered_by_the_sweeper(monkeypatch: pytest.MonkeyPatch) -> None:
    journal: list[str] = []
    lost: list[str] = []
    monkeypatch.setattr(sleeps, "schedule_wake", lambda env, run_id, *rest: lost.append(run_id))
    with TestEnvironment(start=START) as env:
        Napper = _napper(journal, seconds=TWO_HOURS)
        handle = Napper.run()
        env.run_pending()
        assert lost == [handle.run_id]
        env.clock.advance(TWO_HOURS - 1)
        env.sweep()
        env.run_pending()
        assert Napper.find(handle.run_id).status is RunStatus.PAUSED
        env.clock.advance(1)
        env.sweep()
        env.run_pending()
        assert Napper.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal == ["first", "second"]


# ============================================================================ every backend


@pytest.fixture(params=BACKENDS)
def runtime_on(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on each backend (a fresh namespace), on a test clock started at real time."""
    yield configure_on(request.param, service_url, TestClock(time.time()), area="sleeps")
    config.reset()



def test_a_sleeping_run_wakes_at_its_time_on_every_backend(runtime_on: Runtime) -> None:
    """A 2-hour sleep under the test clock: not woken before its time (neither by its timer
    nor by a sweep), woken once after it by its timer (memory: the clock drives the router)
    or by the sweeper (a remote router's delay is real time)."""
    journal: list[str] = []
    clock = runtime_on.clock
    assert isinstance(clock, TestClock)
    Napper = _napper(journal, seconds=TWO_HOURS)
    handle = Napper.run()
    assert isinstance(handle, DispatchHandle)
    work_until(runtime_on, lambda: Napper.find(handle.run_id).status is RunStatus.PAUSED)
    wake_at = Napper.find(handle.run_id).sleeping_until
    assert wake_at is not None
    clock.advance(TWO_HOURS - 5)
    run_sweeps(runtime_on)
    Worker(runtime_on, liveness_wait=0.0).run_pending()
    assert Napper.find(handle.run_id).status is RunStatus.PAUSED
    clock.advance(5)
    run_sweeps(runtime_on)
    work_until(runtime_on, lambda: Napper.find(handle.run_id).status is RunStatus.COMPLETED)
    assert journal == ["first", "second"]


def test_the_wake_payload_round_trips() -> None:
    payload = SleepWakePayload(context_id="r", reactor="x", step="nap", wake_at=START)
    assert SleepWakePayload.model_validate(payload.model_dump()) == payload


@pytest.mark.parametrize("block", range(2))
def test_the_examples_of_docs_schedules_run(block: int) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "schedules.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert len(blocks) >= 2  # the two of "Durable sleep" (tests/schedules runs the others)
    exec(compile(blocks[block], f"docs/schedules.md[{block}]", "exec"), {"__name__": "docs"})


def test_the_cli_and_the_dashboard_show_a_sleeping_run(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fastapi", reason="the dashboard needs the 'dashboard' extra")
    from typer.testing import CliRunner  # deferred: the CLI and dashboard are optional extras

    from reactor.cli import app
    from reactor.cli import runs as runs_cli
    from reactor.dashboard.run_detail import document_view
    from reactor.model.checkpoints import raw_document

    journal: list[str] = []
    with TestEnvironment(start=START) as env:
        Napper = _napper(journal, seconds=TWO_HOURS)
        handle = Napper.run()
        env.run_pending()
        monkeypatch.setattr(runs_cli, "_runtime", lambda *args, **kwargs: env.runtime)
        record = env.storage.contexts.load(handle.run_id)
        assert record is not None
        shown = document_view(env.storage, raw_document(record), handle.run_id)
        out = CliRunner().invoke(app, ["runs", "show", handle.run_id, "--json"])
    assert shown["sleep"] == {"step": "nap", "wake_at": START + TWO_HOURS, "since": START}
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["sleep"]["wake_at"] == START + TWO_HOURS
    template = (Path(__file__).resolve().parents[2] / "reactor" / "dashboard" / "templates"
                / "run.html").read_text()
    assert "Sleeping until {{ stamp(run.sleep.wake_at) }} UTC" in template


@pytest.mark.parametrize("until", [datetime.max.replace(tzinfo=UTC), datetime(9000, 1, 1,
                                                                              tzinfo=UTC)])
def test_an_until_more_than_ten_years_ahead_fails_the_step_when_reached(until: datetime) -> None:
    """A wake time past ``MAX_SLEEP_SECONDS`` was parked and every view of the run then
    raised (year out of range; found by an outside attack): it now fails the step."""
    journal: list[str] = []
    with TestEnvironment(start=START):
        Napper = _napper(journal, until=until)
        result = Napper.run()
    assert result.failed and type(result.error).__name__ == "SleepValueError"
    assert "ten years" in str(result.error)
    assert journal == ["first", "undo first"]


def test_a_wake_up_due_while_the_run_was_suspended_is_armed_again_by_unsuspend() -> None:
    """The wake-up timer that came while the run was suspended found it suspended and was
    dropped, so the unsuspended run slept on until a sweep (found by an outside attack).
    Unsuspend now arms the wake-up again: the run completes without any sweep, its steps
    each run once."""
    journal: list[str] = []
    with TestEnvironment(start=START) as env:
        Napper = _napper(journal, seconds=60)
        handle = Napper.run()
        env.run_pending()
        Napper.suspend(handle.run_id)
        env.clock.advance(120)
        env.run_pending()  # the timer comes and goes
        assert Napper.find(handle.run_id).status is RunStatus.SUSPENDED
        Napper.unsuspend(handle.run_id)
        env.clock.advance(1)  # the timer armed again is due at once (its least delay)
        env.run_pending()
        view = Napper.find(handle.run_id)
    assert view.status is RunStatus.COMPLETED
    assert journal == ["first", "second"]


def test_independent_sleeps_under_max_concurrency_run_one_after_the_other() -> None:
    """A sleep runs alone (docs/schedules.md, "Durable sleep"): the second of two
    independent sleeps is reached when the run wakes from the first; nothing is lost."""
    journal: list[str] = []

    class TwoNaps(Reactor):
        max_concurrency = 3

        short = sleep(seconds=60)
        long = sleep(seconds=120)

        @step(wait_for=["short", "long"])
        def act(inputs: Any, ctx: Any) -> str:
            journal.append("act")
            return "done"

    with TestEnvironment(start=START) as env:
        handle = TwoNaps.run()
        assert isinstance(handle, DispatchHandle)
        env.run_pending()
        assert TwoNaps.find(handle.run_id).sleeping_until == START + 60
        env.clock.advance(60)
        assert TwoNaps.find(handle.run_id).sleeping_until == START + 180
        env.clock.advance(119)
        assert TwoNaps.find(handle.run_id).status is RunStatus.PAUSED
        env.clock.advance(1)
        assert TwoNaps.find(handle.run_id).status is RunStatus.COMPLETED
    assert journal == ["act"]
