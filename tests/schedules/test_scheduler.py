"""The scheduler on the in-memory backend with the test clock: ticks, catch-up, jitter,
overlap, pause and resume, races and crashes between the two writes of a tick
(docs/schedules.md, "Schedules")."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from reactor import RunStatus
from reactor.engine.run_control import idempotency
from reactor.schedules import (
    Schedule,
    Scheduler,
    add_schedule,
    idempotency_key,
    jitter_for,
    list_schedules,
    pause_schedule,
    remove_schedule,
    resume_schedule,
    tick_text,
)
from reactor.schedules import scheduler as scheduler_module
from reactor.schedules.records import Decision, ScheduleState, schedule_store
from reactor.testing import TestEnvironment
from tests.schedules.reactors import JOURNAL, Napping, Report

START = datetime(2030, 1, 1, tzinfo=UTC).timestamp()


@pytest.fixture
def env() -> Iterator[TestEnvironment]:
    JOURNAL.clear()
    with TestEnvironment(start=START) as environment:
        yield environment
    JOURNAL.clear()


def _every(seconds: int = 60, **options: object) -> Schedule:
    return Schedule(Report, every=seconds, tick_input="tick", name="report", **options)


def _runs(env: TestEnvironment) -> list[str]:
    """Run the queued jobs; the ticks the runs saw, in order."""
    env.run_pending()
    return list(JOURNAL)


def _minutes(*minutes: int) -> list[str]:
    return [tick_text(START + 60 * m) for m in minutes]


def test_a_minute_schedule_runs_once_per_tick_with_its_tick(env: TestEnvironment) -> None:
    scheduler = Scheduler(env.runtime, schedules=[_every()])
    assert scheduler.tick() == []  # first sight: ticks start after now
    assert scheduler.next_due == START + 60
    for _ in range(3):
        env.clock.advance(60)
        outcomes = scheduler.tick()
        assert [o.action for o in outcomes] == ["run"]
        assert scheduler.tick() == []  # a second pass at the same time settles nothing
    assert _runs(env) == _minutes(1, 2, 3)
    view = list_schedules(runtime=env.runtime)[0]
    assert view.last_tick == START + 180 and view.last_run_status is RunStatus.COMPLETED
    assert scheduler.next_due == START + 240


def test_a_cron_schedule_in_a_time_zone(env: TestEnvironment) -> None:
    schedule = Schedule(Report, cron="*/2 * * * *", timezone="Asia/Kolkata", tick_input="tick",
                        name="two")
    scheduler = Scheduler(env.runtime, schedules=[schedule])
    scheduler.tick()
    for _ in range(4):
        env.clock.advance(60)
        scheduler.tick()
    assert _runs(env) == _minutes(2, 4)


def test_the_log_lines_name_the_schedule_tick_and_run(
    env: TestEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler = Scheduler(env.runtime, schedules=[_every()])
    scheduler.tick()
    env.clock.advance(60)
    with caplog.at_level(logging.INFO, logger="reactor.schedules"):
        (outcome,) = scheduler.tick()
    assert (f"event=schedule_tick schedule=report tick={tick_text(START + 60)} "
            f"run_id={outcome.run_id}") in caplog.messages


@pytest.mark.parametrize(("catchup", "expected_runs", "skipped"), [
    ("skip", [10], (1, 9)),          # the ticks more than a minute late are missed
    ("one", [10], (1, 9)),           # one run, for the newest missed tick
    ("all", [8, 9, 10], (1, 7)),     # every one, but only max_catchup=3 of them: the newest
])
def test_catchup_after_downtime(
    env: TestEnvironment, catchup: str, expected_runs: list[int], skipped: tuple[int, int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    schedule = _every(catchup=catchup, max_catchup=3, overlap="allow")
    Scheduler(env.runtime, schedules=[schedule]).tick()
    env.clock.advance(600 + 50)  # ten ticks came; the last is 50 s late, the others more
    with caplog.at_level(logging.INFO, logger="reactor.schedules"):
        outcomes = Scheduler(env.runtime, schedules=[schedule]).tick()
    assert [o.tick for o in outcomes if o.action == "run"] == [START + 60 * m
                                                               for m in expected_runs]
    assert _runs(env) == _minutes(*expected_runs)
    ranges = [o.skipped for o in outcomes if o.skipped] + [
        (o.tick, o.tick) for o in outcomes if o.action == "skip"]
    assert (min(r[0] for r in ranges), max(r[1] for r in ranges)) == (
        START + 60 * skipped[0], START + 60 * skipped[1])
    assert len({o.tick for o in outcomes}) == len(outcomes)
    assert any("event=schedule_ticks_skipped schedule=report" in m or
               "event=schedule_tick_skipped schedule=report" in m for m in caplog.messages)


def test_catchup_skip_runs_nothing_when_every_tick_was_missed(env: TestEnvironment) -> None:
    schedule = _every(3600, catchup="skip")
    Scheduler(env.runtime, schedules=[schedule]).tick()
    env.clock.advance(3 * 3600 + 120)
    (outcome,) = Scheduler(env.runtime, schedules=[schedule]).tick()
    assert outcome.action == "skip" and outcome.reason == "missed"
    assert outcome.tick == START + 3 * 3600
    assert outcome.skipped == (START + 3600, START + 7200)
    assert _runs(env) == []


def test_catchup_skip_still_runs_a_tick_that_is_only_a_little_late(env: TestEnvironment) -> None:
    scheduler = Scheduler(env.runtime, schedules=[_every(catchup="skip")])
    scheduler.tick()
    env.clock.advance(60 + 30)  # 30 s late: within MISSED_AFTER
    assert [o.action for o in scheduler.tick()] == ["run"]
    assert _runs(env) == _minutes(1)


def test_jitter_delays_each_tick_by_its_own_deterministic_share(env: TestEnvironment) -> None:
    schedule = _every(3600, jitter=600)
    scheduler = Scheduler(env.runtime, schedules=[schedule])
    scheduler.tick()
    tick = START + 3600
    delay = jitter_for("report", tick, 600)
    assert 0 < delay < 600
    assert scheduler.next_due == pytest.approx(tick + delay)
    env.clock.advance(3600 + delay - 1)
    assert scheduler.tick() == []  # the tick is not due before its jitter
    env.clock.advance(1)
    assert [o.tick for o in scheduler.tick()] == [tick]


def test_overlap_skip_records_the_tick_skipped_while_the_previous_run_runs(
    env: TestEnvironment,
) -> None:
    schedule = Schedule(Napping, every=1800, tick_input="tick", name="napping")
    scheduler = Scheduler(env.runtime, schedules=[schedule])
    scheduler.tick()
    env.clock.advance(1800)
    (first,) = scheduler.tick()
    env.run_pending()
    assert Napping.find(first.run_id or "").status is RunStatus.PAUSED  # it sleeps an hour
    env.clock.advance(1800)
    (second,) = scheduler.tick()
    assert second.action == "skip" and second.run_id is None
    assert second.reason == f"overlap: run {first.run_id} is paused"
    env.clock.advance(1800)  # the first run woke and finished on the way
    assert Napping.find(first.run_id or "").status is RunStatus.COMPLETED
    (third,) = scheduler.tick()
    assert third.action == "run" and third.tick == START + 3 * 1800
    env.run_pending()
    assert [tick_text(START + 1800), tick_text(START + 3 * 1800)] == JOURNAL


def test_overlap_allow_starts_the_tick_anyway(env: TestEnvironment) -> None:
    scheduler = Scheduler(env.runtime, schedules=[_every(overlap="allow")])
    scheduler.tick()
    for _ in range(2):
        env.clock.advance(60)
        scheduler.tick()
    assert _runs(env) == _minutes(1, 2)


def test_pause_stops_ticks_and_resume_continues_from_now(env: TestEnvironment) -> None:
    add_schedule(_every(), runtime=env.runtime)
    scheduler = Scheduler(env.runtime, schedules=[])
    env.clock.advance(60)
    assert len(scheduler.tick()) == 1
    view = pause_schedule("report", runtime=env.runtime)
    assert view.paused and view.next_tick is None
    env.clock.advance(300)
    assert scheduler.tick() == []
    resumed = resume_schedule("report", runtime=env.runtime)
    assert not resumed.paused and resumed.next_tick == START + 420
    assert scheduler.tick() == []  # the ticks of the pause are not run
    env.clock.advance(60)
    assert len(scheduler.tick()) == 1
    assert _runs(env) == _minutes(1, 7)


@pytest.mark.parametrize("catchup", ["one", "all", "skip"])
def test_a_jitter_longer_than_the_gap_between_ticks_loses_no_tick(
    env: TestEnvironment, catchup: str
) -> None:
    """Found by attack: with a jitter longer than the gap between two ticks, a later tick fell
    due before an earlier one, and a scheduler passing every 10 s skipped about half the ticks
    ('catch-up one', 'catch-up limit', 'missed') although none was ever late. A tick's delay is
    now less than the gap to the next tick: ticks fall due in order."""
    schedule = Schedule(Report, cron="* * * * *", jitter=600, tick_input="tick", name="report",
                        catchup=catchup, max_catchup=5, overlap="allow")
    scheduler = Scheduler(env.runtime, schedules=[schedule])
    scheduler.tick()
    settled = []
    for _ in range(360):  # an hour, a pass every 10 s
        env.clock.advance(10)
        settled += scheduler.tick()
    assert [o for o in settled if o.action != "run" or o.skipped] == []
    ran = _runs(env)
    assert ran == sorted(set(ran))
    assert ran[:59] == _minutes(*range(1, 60))
    assert scheduler.next_due is not None
    next_tick = START + 60 * (len(ran) + 1)
    assert next_tick <= scheduler.next_due < next_tick + 60


def test_a_stored_schedule_removed_during_a_pass_is_not_written_back(
    env: TestEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by attack: a scheduler with its own list of code schedules (as in the docs) that
    lost its write to a removal stored the schedule again without its definition, a
    definition-less document that 'list' showed as a code schedule and 'remove' refused."""
    add_schedule(_every(), runtime=env.runtime)
    scheduler = Scheduler(env.runtime, schedules=[])
    env.clock.advance(60)
    store = schedule_store(env.storage)
    put = store.put
    removed: list[bool] = []

    def put_after_a_removal(name: str, document: str, expected_version: str | None) -> object:
        if not removed:
            removed.append(True)
            remove_schedule("report", runtime=env.runtime)
        return put(name, document, expected_version=expected_version)

    monkeypatch.setattr(store, "put", put_after_a_removal)
    assert scheduler.tick() == []
    monkeypatch.undo()
    assert removed == [True]
    assert store.get("report") is None
    assert list_schedules(runtime=env.runtime) == []
    env.clock.advance(60)
    assert scheduler.tick() == []
    assert store.get("report") is None


def test_two_schedulers_racing_start_one_run_per_tick(env: TestEnvironment) -> None:
    schedule = _every(10, overlap="allow")
    one = Scheduler(env.runtime, schedules=[schedule])
    two = Scheduler(env.runtime, schedules=[schedule])
    one.tick()
    two.tick()
    settled = []
    for _ in range(6):
        env.clock.advance(10)
        settled += one.tick() + two.tick()
    assert sorted(o.tick for o in settled) == [START + 10 * k for k in range(1, 7)]
    assert _runs(env) == [tick_text(START + 10 * k) for k in range(1, 7)]


def test_a_scheduler_killed_after_deciding_leaves_the_tick_to_the_next(
    env: TestEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the two writes of a tick: the decision stored, the run not started."""
    schedule = _every()
    Scheduler(env.runtime, schedules=[schedule]).tick()
    env.clock.advance(60)

    def die(*args: object, **kwargs: object) -> str:
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(scheduler_module, "start_once", die)
    with pytest.raises(KeyboardInterrupt):
        Scheduler(env.runtime, schedules=[schedule]).tick()
    monkeypatch.undo()
    record = schedule_store(env.storage).get("report")
    assert record is not None
    state = ScheduleState.from_document("report", record.document)
    assert state.pending == Decision(tick=START + 60, action="run")
    (outcome,) = Scheduler(env.runtime, schedules=[schedule]).tick()
    assert outcome.tick == START + 60 and outcome.action == "run"
    assert _runs(env) == _minutes(1)


def test_a_scheduler_killed_after_starting_the_run_leaves_one_run(
    env: TestEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run started, the settle never written: the next scheduler finds the same run."""
    schedule = _every()
    Scheduler(env.runtime, schedules=[schedule]).tick()
    env.clock.advance(60)
    started: list[str | None] = []

    def start_then_die(*args: object, **kwargs: object) -> str | None:
        started.append(idempotency.start_once(*args, **kwargs))  # type: ignore[arg-type]
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(scheduler_module, "start_once", start_then_die)
    with pytest.raises(KeyboardInterrupt):
        Scheduler(env.runtime, schedules=[schedule]).tick()
    monkeypatch.undo()
    (outcome,) = Scheduler(env.runtime, schedules=[schedule]).tick()
    assert started == [outcome.run_id]
    assert _runs(env) == _minutes(1)
    view = Report.find(outcome.run_id or "")
    assert view.status is RunStatus.COMPLETED


def test_the_tick_run_carries_its_idempotency_key(env: TestEnvironment) -> None:
    scheduler = Scheduler(env.runtime, schedules=[_every()])
    scheduler.tick()
    env.clock.advance(60)
    (outcome,) = scheduler.tick()
    again = idempotency.start_once(Report.definition, {"tick": "x"},
                                   idempotency_key("report", START + 60), runtime=env.runtime)
    assert again == outcome.run_id


def test_a_stored_schedule_of_an_unknown_reactor_is_left_alone(
    env: TestEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    store = schedule_store(env.storage)
    definition = Schedule("tests.schedules.nowhere", every=60).to_definition()
    state = ScheduleState.new(START, definition)
    assert store.put("ghost", state.to_document(), expected_version=None)
    env.clock.advance(120)
    with caplog.at_level(logging.WARNING, logger="reactor.schedules"):
        assert Scheduler(env.runtime, schedules=[]).tick() == []
        assert Scheduler(env.runtime, schedules=[]).tick() == []
    assert sum("event=schedule_unknown_reactor schedule=ghost" in m
               for m in caplog.messages) == 2  # once per scheduler


@pytest.mark.parametrize(("zone", "first", "days", "expected"), [
    # spring forward: 02:30 does not exist on the 31st; the run comes at 03:00 CEST, once
    ("Europe/Paris", datetime(2030, 3, 30, 12, tzinfo=ZoneInfo("Europe/Paris")), 3,
     ["2030-03-31T01:00:00Z", "2030-04-01T00:30:00Z", "2030-04-02T00:30:00Z"]),
    # fall back: 02:30 happens twice on the 27th; one run, at the first
    ("Europe/Paris", datetime(2030, 10, 26, 12, tzinfo=ZoneInfo("Europe/Paris")), 3,
     ["2030-10-27T00:30:00Z", "2030-10-28T01:30:00Z", "2030-10-29T01:30:00Z"]),
    ("America/New_York", datetime(2030, 11, 2, 12, tzinfo=ZoneInfo("America/New_York")), 2,
     ["2030-11-03T07:30:00Z", "2030-11-04T07:30:00Z"]),
])
def test_a_daily_0230_schedule_across_daylight_saving_changes(
    zone: str, first: datetime, days: int, expected: list[str]
) -> None:
    JOURNAL.clear()
    schedule = Schedule(Report, cron="30 2 * * *", timezone=zone, tick_input="tick",
                        name="nightly")
    with TestEnvironment(start=first.timestamp()) as env:
        scheduler = Scheduler(env.runtime, schedules=[schedule])
        for _ in range(days * 24 * 4):  # a pass every 15 minutes
            scheduler.tick()
            env.run_pending()
            env.clock.advance(900)
        assert expected == JOURNAL
    JOURNAL.clear()


def test_a_reactor_run_by_a_schedule_runs_in_a_worker_even_if_synchronous(
    env: TestEnvironment,
) -> None:
    assert Report.definition.background is None
    scheduler = Scheduler(env.runtime, schedules=[_every()])
    scheduler.tick()
    env.clock.advance(60)
    (outcome,) = scheduler.tick()
    assert JOURNAL == []  # nothing ran in the scheduler
    assert _runs(env) == _minutes(1)
    assert Report.find(outcome.run_id or "").status is RunStatus.COMPLETED
