"""``Schedule``: every bad value is refused with a ScheduleValueError naming the field
(docs/schedules.md, "Declaring a schedule")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from reactor import Input, Reactor, input, step
from reactor.errors import DefinitionError, ScheduleValueError
from reactor.schedules import Schedule
from tests.schedules.reactors import Plain, Report


class Counted(Reactor, name="tests.schedules.test_spec.counted"):
    """A reactor whose inputs are numbers: none can receive the tick's text."""

    count = Input(int)

    @step(count=input("count"))
    def act(inputs: Any, ctx: Any) -> int:
        return int(inputs.count)


@pytest.mark.parametrize(("options", "field"), [
    ({}, "cron"),                                                  # neither
    ({"cron": "* * * * *", "every": 60}, "cron"),                  # both
    ({"cron": "61 * * * *"}, "cron"),
    ({"cron": "every minute"}, "cron"),
    ({"cron": "0 0 30 2 *"}, "cron"),                              # 30 February never comes
    ({"cron": ""}, "cron"),
    ({"cron": 5}, "cron"),
    ({"every": 0}, "every"),
    ({"every": -5}, "every"),
    ({"every": 1.5}, "every"),
    ({"every": float("nan")}, "every"),
    ({"every": True}, "every"),
    ({"every": "60"}, "every"),
    ({"every": timedelta(milliseconds=500)}, "every"),
    ({"every": 400 * 86400}, "every"),
    ({"cron": "0 2 * * *", "timezone": "Mars/Olympus"}, "timezone"),
    ({"cron": "0 2 * * *", "timezone": ""}, "timezone"),
    ({"every": 60, "timezone": "Europe/Paris"}, "timezone"),
    ({"every": 60, "catchup": "some"}, "catchup"),
    ({"every": 60, "max_catchup": 0}, "max_catchup"),
    ({"every": 60, "max_catchup": 10_001}, "max_catchup"),
    ({"every": 60, "max_catchup": 2.0}, "max_catchup"),
    ({"every": 60, "jitter": -1}, "jitter"),
    ({"every": 60, "jitter": float("inf")}, "jitter"),
    ({"every": 60, "jitter": "5"}, "jitter"),
    ({"every": 60, "jitter": 61}, "jitter"),                        # longer than the period
    ({"every": 60, "jitter": timedelta(hours=1)}, "jitter"),
    ({"every": 60, "overlap": "queue"}, "overlap"),
    ({"every": 60, "name": ""}, "name"),
    ({"every": 60, "name": "has space"}, "name"),
    ({"every": 60, "name": "x" * 101}, "name"),
    ({"every": 60, "name": "-leading"}, "name"),
    ({"every": 60, "args": {"bogus": 1}}, "args"),                  # unknown input
    ({"every": 60, "args": {"tick": object()}}, "args"),            # not JSON
    ({"every": 60, "args": ["a"]}, "args"),
    ({"every": 60, "tick_input": "nope"}, "tick_input"),           # not an input
    ({"every": 60, "tick_input": ""}, "tick_input"),
])
def test_bad_values_name_their_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ScheduleValueError) as caught:
        Schedule(Report, **{"tick_input": "tick", **options})
    assert caught.value.field == field
    assert isinstance(caught.value, DefinitionError) and isinstance(caught.value, ValueError)


def test_args_are_checked_against_the_reactors_inputs() -> None:
    with pytest.raises(ScheduleValueError) as caught:
        Schedule(Report, every=60, args={"region": 5}, tick_input="tick")
    assert caught.value.field == "args" and "region" in str(caught.value)
    with pytest.raises(ScheduleValueError) as missing:  # 'tick' is required: no tick_input
        Schedule(Report, every=60)
    assert missing.value.field == "args" and "tick" in str(missing.value)


def test_a_reactor_must_be_a_reactor_class_or_a_name() -> None:
    for bad in (42, object, None, " "):
        with pytest.raises(ScheduleValueError) as caught:
            Schedule(bad, every=60)
        assert caught.value.field == "reactor"


def test_a_good_schedule_and_its_stored_shape() -> None:
    schedule = Schedule(Report, cron="@daily", timezone="Europe/Paris", args={"region": "us"},
                        name="daily-report", catchup="all", max_catchup=5, jitter=timedelta(
                            seconds=30), overlap="allow", tick_input="tick")
    assert schedule.cron == "0 0 * * *"
    assert schedule.jitter == 30.0
    assert schedule.spec == "cron '0 0 * * *' (Europe/Paris)"
    assert schedule.inputs_for("T") == {"region": "us", "tick": "T"}
    again = Schedule.from_definition("daily-report", schedule.to_definition())
    assert again == schedule and again.args == schedule.args
    assert Schedule(Plain, every=timedelta(minutes=5)).name == "tests.schedules.plain"
    assert Schedule("some.unregistered.reactor", every=60).reactor == "some.unregistered.reactor"


def test_a_stored_definition_with_bad_values_names_the_field() -> None:
    with pytest.raises(ScheduleValueError) as caught:
        Schedule.from_definition("x", {"reactor": "r", "every": 60, "catchup": "never"})
    assert caught.value.field == "catchup"
    with pytest.raises(ScheduleValueError) as no_reactor:
        Schedule.from_definition("x", {"every": 60})
    assert no_reactor.value.field == "reactor"


def test_a_tick_input_that_cannot_take_the_tick_text_names_tick_input() -> None:
    # found by attack: the error named field 'args', which the schedule did not get wrong
    with pytest.raises(ScheduleValueError) as caught:
        Schedule(Counted, every=60, tick_input="count")
    assert caught.value.field == "tick_input" and "count" in str(caught.value)
    with pytest.raises(ScheduleValueError) as missing:  # the arguments still name args
        Schedule(Counted, every=60)
    assert missing.value.field == "args"
