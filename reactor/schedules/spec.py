"""``Schedule``: a reactor started at times (docs/schedules.md, "Schedules").

A :class:`Schedule` names a reactor, when it ticks (a cron expression in a time zone, or a
fixed period), the run's arguments, and the policies of catch-up (ticks missed while no
scheduler ran), jitter and overlap. It is a frozen value checked when it is built: every bad
value raises :class:`~reactor.errors.ScheduleValueError` naming the field. A schedule is
declared in code (:func:`reactor.schedules.register`) or stored with ``reactor schedules add``
(:func:`reactor.schedules.add_schedule`), which keeps its :meth:`Schedule.to_definition`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, cast

from reactor import registry
from reactor.dsl.definition import ReactorDefinition
from reactor.errors import (
    InputValidationError,
    ReactorError,
    ScheduleValueError,
    UnknownReactorError,
)
from reactor.schedules.ticks import TickRule, check_cron, check_timezone, jitter_for

__all__ = [
    "CATCHUP_POLICIES",
    "DEFAULT_MAX_CATCHUP",
    "MAX_MAX_CATCHUP",
    "NAME_PATTERN",
    "OVERLAP_POLICIES",
    "CatchUp",
    "Overlap",
    "Schedule",
    "check_name",
]

#: What a scheduler does with the ticks that fell due while no scheduler ran.
CatchUp = Literal["skip", "one", "all"]
#: What a tick does while the schedule's previous run has not finished.
Overlap = Literal["skip", "allow"]

CATCHUP_POLICIES: tuple[str, ...] = ("skip", "one", "all")
OVERLAP_POLICIES: tuple[str, ...] = ("skip", "allow")

#: ``catchup="all"`` runs at most this many missed ticks by default (the newest ones).
DEFAULT_MAX_CATCHUP = 100
#: The largest ``max_catchup`` accepted.
MAX_MAX_CATCHUP = 10_000
#: The largest ``jitter`` accepted, in seconds (a day).
MAX_JITTER = 86_400.0

#: A schedule name: 1-100 characters, letters, digits, ``_``, ``.``, ``-``, starting with a
#: letter or digit.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")


def check_name(name: object) -> str:
    """A schedule name, checked.

    Raises:
        ScheduleValueError: not 1-100 letters, digits, ``_``, ``.`` or ``-`` starting with a
            letter or digit; ``field`` is ``"name"``.
    """
    if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
        raise ScheduleValueError(
            "name must be 1-100 characters: letters, digits, '_', '.' or '-', starting with a "
            f"letter or digit; got {name!r}",
            field="name",
        )
    return name


def _reactor_name(reactor: object) -> str:
    if isinstance(reactor, str):
        if not reactor.strip():
            raise ScheduleValueError("reactor must be a Reactor class or its registered name",
                                     field="reactor")
        return reactor
    definition = getattr(reactor, "definition", None)
    if isinstance(reactor, type) and isinstance(definition, ReactorDefinition):
        return definition.name
    raise ScheduleValueError(
        f"reactor must be a Reactor class or its registered name, got {reactor!r}",
        field="reactor",
    )


def _definition_of(reactor: object, name: str) -> ReactorDefinition | None:
    definition = getattr(reactor, "definition", None)
    if isinstance(definition, ReactorDefinition):
        return definition
    try:
        found = registry.get(name)
    except UnknownReactorError:
        return None
    definition = getattr(found, "definition", None)
    return definition if isinstance(definition, ReactorDefinition) else None


def _json_args(args: object) -> dict[str, Any]:
    if args is None:
        return {}
    if not isinstance(args, Mapping) or not all(isinstance(k, str) for k in args):
        raise ScheduleValueError(
            f"args must be a mapping of input name to value, got {type(args).__name__}",
            field="args",
        )
    try:
        json.dumps(dict(args), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ScheduleValueError(f"args must be JSON values (str, number, bool, None, list, "
                                 f"dict): {exc}", field="args") from exc
    return dict(args)


def _seconds(value: object, name: str, maximum: float) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if (isinstance(seconds, bool) or not isinstance(seconds, int | float)
            or not math.isfinite(seconds) or seconds < 0 or seconds > maximum):
        raise ScheduleValueError(
            f"{name} must be a number of seconds (or a timedelta) from 0 to {maximum:g}, "
            f"got {value!r}",
            field=name,
        )
    return float(seconds)


@dataclass(frozen=True, init=False)
class Schedule:
    """A reactor started at times, exactly one run per tick across every scheduler
    (docs/schedules.md, "Schedules").

    Args:
        reactor: the ``Reactor`` class, or its registered name (``name=`` class keyword, else
            ``module.QualName``).
        cron: a cron expression (five fields, or six with seconds first; ``@daily`` and the
            other shorthands), read in ``timezone``. Exactly one of ``cron`` and ``every``.
        every: a fixed period: a ``timedelta`` or a number of seconds, whole and at least 1;
            ticks at the multiples of the period since the Unix epoch.
        args: the run's inputs (a mapping of JSON values), checked against the reactor's
            inputs when the reactor is known here.
        timezone: the IANA time zone ``cron`` is read in (default ``"UTC"``); only with
            ``cron``.
        name: the schedule's name, the key of its stored state and of its runs' idempotency
            keys (default: the reactor's name); 1-100 letters, digits, ``_``, ``.``, ``-``.
        catchup: the ticks that fell due while no scheduler ran: ``"skip"`` (run none of
            them, only ticks from now on), ``"one"`` (default: one run, for the latest) or
            ``"all"`` (every one, oldest first, at most ``max_catchup``: the newest ones).
        max_catchup: the most missed ticks ``catchup="all"`` runs (default 100, at most
            10,000).
        jitter: the most seconds (or a ``timedelta``) a tick's run is delayed: each tick waits
            a deterministic fraction of it (the same in every scheduler), to spread schedules
            that tick together; at most a day, and at most ``every``. A tick's delay is also
            less than the gap to the next tick (:meth:`due`), so ticks fall due in order.
        overlap: ``"skip"`` (default: a tick whose previous run is not finished is recorded
            skipped, with the reason) or ``"allow"`` (start it anyway).
        tick_input: the name of a reactor input that receives the tick, as ISO 8601 UTC text
            (``"2030-01-01T02:00:00Z"``); ``None``: none.

    Raises:
        ScheduleValueError: a field is unusable; ``exc.field`` names it (both or neither of
            ``cron`` and ``every``: ``"cron"``; ``timezone`` with ``every``:
            ``"timezone"``).
    """

    reactor: str
    name: str
    cron: str | None
    every: int | None
    timezone: str
    args: Mapping[str, Any] = field(hash=False)
    catchup: CatchUp
    max_catchup: int
    jitter: float
    overlap: Overlap
    tick_input: str | None

    def __init__(
        self,
        reactor: Any,
        *,
        cron: str | None = None,
        every: timedelta | float | None = None,
        args: Mapping[str, Any] | None = None,
        timezone: str | None = None,
        name: str | None = None,
        catchup: str = "one",
        max_catchup: int = DEFAULT_MAX_CATCHUP,
        jitter: timedelta | float = 0.0,
        overlap: str = "skip",
        tick_input: str | None = None,
    ) -> None:
        reactor_name = _reactor_name(reactor)
        schedule_name = check_name(reactor_name if name is None else name)
        if (cron is None) == (every is None):
            raise ScheduleValueError(
                "give exactly one of cron='...' or every=... "
                f"(got {'both' if cron is not None else 'neither'})",
                field="cron",
            )
        expression = check_cron(cron) if cron is not None else None
        period = TickRule.period(every) if every is not None else None
        if every is not None and timezone not in (None, "UTC"):
            raise ScheduleValueError(
                "timezone applies to cron schedules only (every= ticks in UTC seconds)",
                field="timezone",
            )
        zone = "UTC" if timezone is None else timezone
        check_timezone(zone)
        if catchup not in CATCHUP_POLICIES:
            raise ScheduleValueError(
                f"catchup must be one of {', '.join(CATCHUP_POLICIES)}, got {catchup!r}",
                field="catchup",
            )
        if (isinstance(max_catchup, bool) or not isinstance(max_catchup, int)
                or not 1 <= max_catchup <= MAX_MAX_CATCHUP):
            raise ScheduleValueError(
                f"max_catchup must be an integer from 1 to {MAX_MAX_CATCHUP}, "
                f"got {max_catchup!r}",
                field="max_catchup",
            )
        if overlap not in OVERLAP_POLICIES:
            raise ScheduleValueError(
                f"overlap must be one of {', '.join(OVERLAP_POLICIES)}, got {overlap!r}",
                field="overlap",
            )
        if tick_input is not None and (not isinstance(tick_input, str) or not tick_input):
            raise ScheduleValueError(
                f"tick_input must be an input name or None, got {tick_input!r}",
                field="tick_input",
            )
        values = _json_args(args)
        delay = _seconds(jitter, "jitter", MAX_JITTER)
        if period is not None and delay > period:
            raise ScheduleValueError(
                f"jitter must be at most the period ({period} s), got {jitter!r}: a longer one "
                "would make a tick fall due after the next one",
                field="jitter",
            )
        set_ = object.__setattr__
        set_(self, "reactor", reactor_name)
        set_(self, "name", schedule_name)
        set_(self, "cron", expression)
        set_(self, "every", period)
        set_(self, "timezone", zone)
        set_(self, "args", values)
        set_(self, "catchup", cast(CatchUp, catchup))
        set_(self, "max_catchup", max_catchup)
        set_(self, "jitter", delay)
        set_(self, "overlap", cast(Overlap, overlap))
        set_(self, "tick_input", tick_input)
        definition = _definition_of(reactor, reactor_name)
        if definition is not None:
            self.check_inputs(definition)

    @property
    def rule(self) -> TickRule:
        """When the schedule ticks (:class:`reactor.schedules.ticks.TickRule`)."""
        return TickRule(self.cron, self.every, self.timezone)

    @property
    def spec(self) -> str:
        """The tick rule as one line: ``cron '0 2 * * *' (Europe/Paris)`` or ``every 60 s``."""
        return self.rule.describe()

    def due(self, tick: float) -> float:
        """When tick ``tick``'s run starts: the tick plus its jitter (docs/schedules.md,
        "Jitter"), the same in every scheduler.

        The delay is :func:`~reactor.schedules.ticks.jitter_for` of ``jitter``, or of the gap
        to the next tick when that is shorter (a cron expression's ticks need not be evenly
        spaced), so a schedule's ticks fall due in their order.
        """
        if self.jitter <= 0:
            return tick
        spread = self.jitter
        following = self.rule.after(tick)
        if following is not None:
            spread = min(spread, following - tick)
        return tick + jitter_for(self.name, tick, spread)

    def inputs_for(self, tick_text: str) -> dict[str, Any]:
        """The run's inputs for the tick named ``tick_text``: ``args``, plus the tick under
        ``tick_input`` when set."""
        inputs = dict(self.args)
        if self.tick_input is not None:
            inputs[self.tick_input] = tick_text
        return inputs

    def check_inputs(self, definition: ReactorDefinition) -> None:
        """Check ``args`` (and ``tick_input``) against ``definition``'s inputs, as a run
        would validate them.

        Raises:
            ScheduleValueError: ``definition`` is another reactor's (``field="reactor"``); an
                undeclared ``tick_input``, or one whose input refuses the tick's text
                (``field="tick_input"``); arguments the reactor's inputs refuse, the message
                naming each field (``field="args"``).
        """
        if definition.name != self.reactor:
            raise ScheduleValueError(
                f"schedule {self.name!r} runs reactor {self.reactor!r}, not {definition.name!r}",
                field="reactor",
            )
        contract = definition.contract
        if self.tick_input is not None and self.tick_input not in contract.names:
            raise ScheduleValueError(
                f"tick_input {self.tick_input!r} is not an input of reactor {self.reactor!r} "
                f"(its inputs: {', '.join(sorted(contract.names)) or 'none'})",
                field="tick_input",
            )
        try:
            contract.validate(self.inputs_for("2000-01-01T00:00:00Z"))
        except InputValidationError as exc:
            if self.tick_input in {key.split(".")[0] for key in exc.field_errors}:
                raise ScheduleValueError(
                    f"tick_input {self.tick_input!r} of reactor {self.reactor!r} cannot take "
                    f"the tick as ISO 8601 text: {exc}",
                    field="tick_input",
                ) from exc
            raise ScheduleValueError(
                f"args do not match the inputs of reactor {self.reactor!r}: {exc}",
                field="args",
            ) from exc

    def to_definition(self) -> dict[str, Any]:
        """The stored shape of the schedule (JSON-native; docs/protocol.md, "Schedules")."""
        return {
            "reactor": self.reactor,
            "cron": self.cron,
            "every": self.every,
            "timezone": self.timezone,
            "args": dict(self.args),
            "catchup": self.catchup,
            "max_catchup": self.max_catchup,
            "jitter": self.jitter,
            "overlap": self.overlap,
            "tick_input": self.tick_input,
        }

    @classmethod
    def from_definition(cls, name: str, stored: Mapping[str, Any]) -> Schedule:
        """Rebuild a stored schedule (:meth:`to_definition`'s shape); unknown keys are
        ignored, absent ones take their defaults, and the reactor need not be registered.

        Raises:
            ScheduleValueError: a stored value is unusable (naming the field).
        """
        try:
            return cls(
                str(stored["reactor"]),
                name=name,
                cron=stored.get("cron"),
                every=stored.get("every"),
                args=stored.get("args") or {},
                timezone=stored.get("timezone"),
                catchup=stored.get("catchup", "one"),
                max_catchup=stored.get("max_catchup", DEFAULT_MAX_CATCHUP),
                jitter=stored.get("jitter", 0.0),
                overlap=stored.get("overlap", "skip"),
                tick_input=stored.get("tick_input"),
            )
        except KeyError as exc:
            raise ScheduleValueError(f"stored schedule {name!r} names no reactor",
                                     field="reactor") from exc
        except ScheduleValueError:
            raise
        except ReactorError as exc:  # pragma: no cover - every check raises the typed error
            raise ScheduleValueError(str(exc), field="reactor") from exc
