"""Step declarations: ``step``, ``compose``, ``map_step`` and ``interrupt`` (docs/concepts.md,
"Reactors and steps"; docs/run-control.md, "Interrupts").

Each returns a :class:`StepSpec` that is assigned to a class attribute of a ``Reactor``; the
attribute name becomes the step name. ``step`` also works as a decorator for function steps,
whose ``undo``/``compensate`` are attached with ``@spec.undo`` / ``@spec.compensate`` (like
``property.setter``; the decorated function is returned unchanged).

Keyword arguments other than ``wait_for``/``retries`` (and ``source``/``args``/``atomic`` for a
map) are the step's arguments: templates (``input``, ``result``, ``value``, ``element``) or plain
literals (treated as ``value(x)``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, overload

from reactor.dsl.callables import check_function_hook
from reactor.dsl.coordination import Coordination, merge_coordination, normalize_coordination
from reactor.dsl.fan_out import FanOut
from reactor.dsl.interrupt import DEFAULT_MAX_ATTEMPTS, InterruptDecl
from reactor.dsl.on_failure import OnFailure, checked_on_failure
from reactor.dsl.retries import Retries
from reactor.dsl.sleep import SleepDecl
from reactor.dsl.step import BaseStep
from reactor.dsl.templates import Template, ValueRef
from reactor.dsl.timeouts import Timeouts
from reactor.errors import DefinitionError
from reactor.model.interrupt_claim import MAX_CORRELATION_ID_LENGTH

__all__ = ["StepKind", "StepSpec", "compose", "interrupt", "map_step", "sleep", "step"]

StepKind = Literal[
    "step", "compose", "map", "async_step", "async_reactor", "interrupt", "sleep"
]

#: ``fn(inputs, ctx)`` for a function step's ``run``.
RunFunction = Callable[..., Any]


def _check_sync(fn: Any, what: str) -> None:
    """Refuse a generator body: plain and ``async def`` functions are step bodies
    (docs/concepts.md, "Async steps"), generators return no result."""
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise DefinitionError(
            f"{what} {getattr(fn, '__qualname__', fn)!r} is a generator: a step body is a plain "
            "or async def function that returns its result"
        )


def _as_template(name: str, raw: Any) -> Template:
    return raw if isinstance(raw, Template) else ValueRef(value=raw)


def _names(wait_for: str | Iterable[str] | None) -> tuple[str, ...]:
    if wait_for is None:
        return ()
    if isinstance(wait_for, str):
        return (wait_for,)
    if not isinstance(wait_for, Iterable):
        raise DefinitionError(
            f"wait_for must be a step name or names, got {type(wait_for).__name__}"
        )
    names = tuple(wait_for)
    for n in names:
        if not isinstance(n, str):
            raise DefinitionError(f"wait_for entries must be step names, got {n!r}")
    return names


@dataclass(eq=False)
class StepSpec:
    """One declared step (the internal representation shared by every declaration style).

    Attributes:
        kind: ``"step"`` (leaf), ``"compose"`` (child reactor), ``"map"`` (inline map),
            ``"async_step"`` (a leaf run as its own job; :mod:`reactor.dsl.async_step`),
            ``"async_reactor"`` (a child reactor run as its own background run;
            :mod:`reactor.dsl.async_reactor`) or
            ``"interrupt"`` (a pause for outside input; :mod:`reactor.dsl.interrupt`) or
            ``"sleep"`` (a durable pause until a time; :mod:`reactor.dsl.sleep`).
        arguments: argument name -> template (after wiring by name, in a bound copy).
        wait_for: extra dependencies that pass no data.
        retries: the step-level retry policy (leaf steps only).
        timeouts: the step-level time limits (leaf steps only; docs/concepts.md, "Time
            limits").
        step_class: the ``Step`` subclass of a class-based leaf step.
        function: the ``run`` function of a function step.
        undo_function: ``fn(result, inputs, ctx)`` of a function step.
        compensate_function: ``fn(error, inputs, ctx)`` of a function step.
        target: the child reactor class (compose, async_reactor) or element reactor class
            (map).
        source: the map's source template.
        atomic: map only: stop and roll back on the first failed element (default) or collect.
        fan_out: map only: run the elements as background jobs (:class:`FanOut`), or ``None``
            for an inline map.
        coordination: leaf steps only: the effective step-level coordination (the Step
            class's declarations plus ``step(..., coordination=)``; see
            :mod:`reactor.dsl.coordination`).
        interrupt: interrupt steps only: the interrupt's options (its correlation id is the
            argument ``"correlation_id"``, when declared).
        sleep: sleep steps only: when the step wakes (docs/schedules.md, "Durable sleep").
        transaction: leaf steps only: the body (and its undo) runs in a database transaction
            of the run's storage that also writes the step's checkpoint (docs/concepts.md,
            "Transactional steps").
        on_failure: leaf steps only: ``"pause"`` holds the run before its rollback when this
            step fails, ``"rollback"`` rolls back at once, ``None`` follows the reactor's
            ``on_failure`` (docs/operations.md, "Pause, rewind, fork").
        name: the step name (the attribute name; set when the reactor class is created).
    """

    kind: StepKind
    arguments: dict[str, Template] = field(default_factory=dict)
    wait_for: tuple[str, ...] = ()
    retries: Retries | None = None
    timeouts: Timeouts | None = None
    step_class: type[BaseStep] | None = None
    function: RunFunction | None = None
    undo_function: Callable[..., Any] | None = None
    compensate_function: Callable[..., Any] | None = None
    target: Any = None
    source: Template | None = None
    atomic: bool = True
    fan_out: FanOut | None = None
    coordination: tuple[Coordination, ...] = ()
    interrupt: InterruptDecl | None = None
    sleep: SleepDecl | None = None
    transaction: bool = False
    on_failure: OnFailure | None = None
    name: str = ""

    def undo(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: attach ``fn(result, inputs, ctx)`` as this function step's undo.

        Returns:
            ``fn`` unchanged.

        Raises:
            DefinitionError: this is not a function step, an undo is already attached, or
                this is an ``async_step`` (units are never on the undo stack).
        """
        if self.kind == "async_step":
            raise DefinitionError(
                f"async_step {self.label!r} cannot have an undo: an async unit is never on its "
                "parent's undo stack (use @<step>.compensate for its own failure)"
            )
        self._check_function_hook("undo", self.undo_function)
        _check_sync(fn, "undo")
        check_function_hook(fn, "undo", f"step {self.label!r}")
        self.undo_function = fn
        return fn

    def compensate(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: attach ``fn(error, inputs, ctx)`` as this function step's compensate.

        Returns:
            ``fn`` unchanged.

        Raises:
            DefinitionError: this is not a function step, or a compensate is already attached.
        """
        self._check_function_hook("compensate", self.compensate_function)
        _check_sync(fn, "compensate")
        check_function_hook(fn, "compensate", f"step {self.label!r}")
        self.compensate_function = fn
        return fn

    def _check_function_hook(self, hook: str, current: Any) -> None:
        if self.function is None:
            raise DefinitionError(
                f"@<step>.{hook} applies to function steps only; a Step class defines "
                f"{hook}() as a method"
            )
        if current is not None:
            raise DefinitionError(f"step {self.function.__name__!r} already has an {hook}")

    def bound(self, name: str, arguments: Mapping[str, Template]) -> StepSpec:
        """Return a copy named ``name`` with ``arguments`` (used by the reactor definition)."""
        return replace(self, name=name, arguments=dict(arguments))

    @property
    def label(self) -> str:
        """A human-readable description of the implementation (for messages)."""
        if self.kind in ("interrupt", "sleep"):
            return self.kind
        if self.step_class is not None:
            return self.step_class.__qualname__
        if self.function is not None:
            return getattr(self.function, "__qualname__", repr(self.function))
        return getattr(self.target, "__qualname__", repr(self.target))


class _StepDecorator:
    """What ``step(**args)`` returns: applied to a function, it makes a function step."""

    def __init__(self, arguments: dict[str, Template], wait_for: tuple[str, ...],
                 retries: Retries | None, coordination: Any = None,
                 transaction: bool | None = None, timeouts: Timeouts | None = None,
                 on_failure: OnFailure | None = None) -> None:
        self._arguments = arguments
        self._on_failure = on_failure
        self._wait_for = wait_for
        self._retries = retries
        self._coordination = coordination
        self._transaction = transaction
        self._timeouts = timeouts

    def __call__(self, fn: RunFunction) -> StepSpec:
        if isinstance(fn, type) or not callable(fn):
            raise DefinitionError(f"@step(...) decorates a function, got {fn!r}")
        _check_sync(fn, "step")
        label = f"step {getattr(fn, '__qualname__', fn)!r}"
        check_function_hook(fn, "run", label)
        coordination = normalize_coordination(self._coordination, label)
        transaction = _transactional(self._transaction, False, coordination, label)
        return StepSpec(
            kind="step", arguments=self._arguments, wait_for=self._wait_for,
            retries=self._retries, function=fn, coordination=coordination,
            transaction=transaction,
            timeouts=_timed(self._timeouts, None, transaction, label),
            on_failure=self._on_failure,
        )


def _timed(
    given: Any, declared: Timeouts | None, transaction: bool, label: str
) -> Timeouts | None:
    """The effective ``timeouts`` of a leaf step: ``step(..., timeouts=)``, else the Step
    class's ``timeouts`` attribute (docs/concepts.md, "Time limits").

    Raises:
        DefinitionError: ``given`` is not a :class:`Timeouts`, or the step is transactional
            (its body runs in the engine's thread, inside the transaction the checkpoint
            commits: it cannot be abandoned).
    """
    if given is not None and not isinstance(given, Timeouts):
        raise DefinitionError(f"{label}: timeouts= must be a Timeouts(...), got {given!r}")
    timeouts = given if given is not None else declared
    if timeouts is not None and transaction:
        raise DefinitionError(
            f"{label}: a transactional step cannot declare timeouts: its body runs inside "
            "the transaction its checkpoint commits and cannot be abandoned; bound the "
            "database work itself (statement_timeout)"
        )
    return timeouts


def _transactional(
    given: bool | None, declared: bool, coordination: tuple[Coordination, ...], label: str
) -> bool:
    """The effective ``transaction`` flag of a leaf step: ``step(..., transaction=)``, else
    the Step class's ``transaction`` attribute (docs/concepts.md, "Transactional steps").

    Raises:
        DefinitionError: the flag is not a bool, or the step also declares step-level
            coordination (its holds are released when the body returns, before the
            transaction commits: use reactor-level coordination or row locks instead).
    """
    if given is not None and not isinstance(given, bool):
        raise DefinitionError(
            f"{label}: transaction= must be True, False or None (the Step class's), got "
            f"{given!r}"
        )
    transaction = declared if given is None else given
    if transaction and coordination:
        raise DefinitionError(
            f"{label}: a transactional step cannot declare step-level coordination: its holds "
            "are released when the body returns, before the transaction commits; declare it "
            "on the reactor (held until the run ends) or lock rows inside the transaction "
            "(SELECT ... FOR UPDATE)"
        )
    return transaction


@overload
def step(
    impl: type[BaseStep] | RunFunction,
    /,
    *,
    wait_for: str | Iterable[str] | None = None,
    retries: Retries | None = None,
    coordination: Any = None,
    transaction: bool | None = None,
    timeouts: Timeouts | None = None,
    on_failure: OnFailure | None = None,
    **arguments: Any,
) -> StepSpec: ...


@overload
def step(
    impl: None = None,
    /,
    *,
    wait_for: str | Iterable[str] | None = None,
    retries: Retries | None = None,
    coordination: Any = None,
    transaction: bool | None = None,
    timeouts: Timeouts | None = None,
    on_failure: OnFailure | None = None,
    **arguments: Any,
) -> Callable[[RunFunction], StepSpec]: ...


def step(
    impl: type[BaseStep] | RunFunction | None = None,
    /,
    *,
    wait_for: str | Iterable[str] | None = None,
    retries: Retries | None = None,
    coordination: Any = None,
    transaction: bool | None = None,
    timeouts: Timeouts | None = None,
    on_failure: OnFailure | None = None,
    **arguments: Any,
) -> StepSpec | Callable[[RunFunction], StepSpec]:
    """Declare a leaf step: ``step(StepClass, **args)`` or ``@step(**args)`` on a function.

    Args:
        impl: a ``Step`` subclass, a function ``fn(inputs, ctx)``, or omitted (decorator form).
        wait_for: step names this step waits for without receiving their results.
        retries: a retry policy (overrides the Step class's ``retries``).
        coordination: step-level ``with_*`` declarations (one or a list), added to the Step
            class's own ``coordination`` (see :mod:`reactor.dsl.coordination`).
        transaction: run the body (and its undo) in a database transaction of the run's
            storage that also writes the step's checkpoint, so its database writes happen
            exactly once (docs/concepts.md, "Transactional steps"); ``None``: the Step class's
            ``transaction`` attribute (default ``False``). Needs a storage that can
            (PostgreSQL); any other refuses the run with ``ConfigurationError``.
        timeouts: the step's time limits (overrides the Step class's ``timeouts``;
            docs/concepts.md, "Time limits").
        on_failure: ``"pause"`` holds the run ``failed_paused`` before its rollback when this
            step fails after its retries, ``"rollback"`` rolls back at once; ``None`` (the
            default) follows the reactor's ``on_failure`` (docs/operations.md, "Pause,
            rewind, fork").
        **arguments: the step's arguments (templates or literals). For a ``Step`` class, a
            declared input with no argument takes the reactor input of the same name.

    Returns:
        A :class:`StepSpec`, or a decorator producing one.

    Raises:
        DefinitionError: ``retries`` is not a ``Retries``, ``impl`` is neither a ``Step``
            subclass nor a function, a coordination primitive is declared twice (in the
            list, or both inline and on the Step class), ``transaction`` is not a bool, a
            transactional step declares step-level coordination, ``timeouts`` is not a
            ``Timeouts``, a transactional step declares timeouts, or ``on_failure`` is not
            ``"rollback"``, ``"pause"`` or ``None``.
    """
    on_failure = checked_on_failure(on_failure, "step()")
    if retries is not None and not isinstance(retries, Retries):
        raise DefinitionError(f"retries= must be a Retries(...), got {retries!r}")
    _transactional(transaction, False, (), "step()")  # a bad flag fails here, not when applied
    _timed(timeouts, None, False, "step()")
    args = {k: _as_template(k, v) for k, v in arguments.items()}
    deps = _names(wait_for)
    if impl is None:
        return _StepDecorator(args, deps, retries, coordination, transaction, timeouts,
                              on_failure)
    if isinstance(impl, type):
        if not issubclass(impl, BaseStep):
            raise DefinitionError(
                f"step() takes a Step subclass or a function, got class {impl.__qualname__}"
            )
        label = f"step({impl.__qualname__})"
        merged = merge_coordination(
            impl.coordination, normalize_coordination(coordination, label), label
        )
        transactional = _transactional(transaction, impl.transaction, merged, label)
        return StepSpec(kind="step", arguments=args, wait_for=deps, retries=retries,
                        step_class=impl, coordination=merged, transaction=transactional,
                        timeouts=_timed(timeouts, impl.timeouts, transactional, label),
                        on_failure=on_failure)
    if callable(impl):
        _check_sync(impl, "step")
        label = f"step {getattr(impl, '__qualname__', impl)!r}"
        check_function_hook(impl, "run", label)
        inline = normalize_coordination(coordination, label)
        transactional = _transactional(transaction, False, inline, label)
        return StepSpec(kind="step", arguments=args, wait_for=deps, retries=retries,
                        function=impl, coordination=inline, transaction=transactional,
                        timeouts=_timed(timeouts, None, transactional, label),
                        on_failure=on_failure)
    raise DefinitionError(f"step() takes a Step subclass or a function, got {impl!r}")


def _check_reactor_class(what: str, target: Any) -> None:
    """Refuse anything but a concrete reactor class: one whose creation registered a name
    (``abstract=True`` bases and the ``Reactor`` base itself do not)."""
    name = vars(target).get("reactor_name") if isinstance(target, type) else None
    if not (isinstance(name, str) and name):
        raise DefinitionError(f"{what}() takes a Reactor subclass, got {target!r}")


def compose(
    child: Any,
    /,
    *,
    wait_for: str | Iterable[str] | None = None,
    retries: Any = None,
    **arguments: Any,
) -> StepSpec:
    """Declare a compose step: run reactor ``child`` inline as one step (docs/concepts.md,
    "Compose").

    The child's context is embedded in the parent's; a failed child rolls itself back before
    the parent sees the ``Failure``; undoing a completed compose replays the child's undo stack.

    Args:
        child: a ``Reactor`` subclass.
        wait_for: extra dependencies.
        retries: rejected — only leaf steps retry.
        **arguments: the child's inputs (templates or literals); a child input with no
            argument takes the parent's input of the same name.

    Returns:
        A :class:`StepSpec` of kind ``"compose"``.

    Raises:
        DefinitionError: ``child`` is not a Reactor subclass, or ``retries`` was given.
    """
    _check_reactor_class("compose", child)
    if retries is not None:
        raise DefinitionError(
            f"compose({getattr(child, '__qualname__', child)}): retries={retries!r} is not "
            "supported: only leaf steps retry"
        )
    return StepSpec(
        kind="compose",
        arguments={k: _as_template(k, v) for k, v in arguments.items()},
        wait_for=_names(wait_for),
        target=child,
    )


def map_step(
    element_reactor: Any,
    /,
    *,
    source: Any,
    args: Mapping[str, Any] | None = None,
    atomic: bool = True,
    wait_for: str | Iterable[str] | None = None,
    retries: Any = None,
    fan_out: FanOut | bool | None = None,
) -> StepSpec:
    """Declare an inline map: run ``element_reactor`` once per element of ``source``.

    docs/concepts.md, "Inline map": elements run sequentially, each with its own stored context
    whose ``map_metadata`` records the map step, map id and element index.

    Args:
        element_reactor: a ``Reactor`` subclass run once per element.
        source: a template (usually ``result(...)`` or ``input(...)``) resolving to a sequence.
        args: the element reactor's inputs: templates, where ``element("<this step>", path)``
            is the current element. An element input with no argument takes the parent's
            input of the same name.
        atomic: ``True`` (default): stop at the first failed element, roll back the completed
            ones (highest index first) and fail the step. ``False``: run every element and
            return a :class:`~reactor.model.results.MapResults` of per-element results.
        wait_for: extra dependencies.
        retries: rejected — only leaf steps retry.
        fan_out: ``FanOut(batch_size=N)`` (or ``True`` for ``FanOut()``, batch size 50) runs
            one background job per element, at most ``N`` enqueued per throw, and rolls the
            map back with one job per started element (docs/fan_out.md;
            :mod:`reactor.engine.maps.fan_out`). Its value is then a lazy
            :class:`~reactor.engine.maps.results.MapResultEnumerator`. ``None`` (default): the
            elements run inline, one after another. A map inside a map element always runs
            inline.

    Returns:
        A :class:`StepSpec` of kind ``"map"``.

    Raises:
        DefinitionError: wrong element reactor, ``source`` not a template, or ``retries``.
    """
    _check_reactor_class("map_step", element_reactor)
    if retries is not None:
        raise DefinitionError(
            f"map_step({getattr(element_reactor, '__qualname__', element_reactor)}): "
            f"retries={retries!r} is not supported: only leaf steps retry"
        )
    if not isinstance(source, Template):
        raise DefinitionError("map_step(source=...) must be a template such as result('x')")
    return StepSpec(
        kind="map",
        arguments={k: _as_template(k, v) for k, v in (args or {}).items()},
        wait_for=_names(wait_for),
        target=element_reactor,
        source=source,
        atomic=bool(atomic),
        fan_out=FanOut.coerce(fan_out),
    )


def interrupt(
    *,
    wait_for: str | Iterable[str] | None = None,
    correlation_id: Any = None,
    schema: Any = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    timeout: float | None = None,
    expiry: Literal["lazy", "active"] | None = None,
) -> StepSpec:
    """Declare an interrupt: the run pauses here until ``Reactor.resume`` brings a payload,
    which becomes this step's result (docs/run-control.md, "Interrupts").

    Reaching the step stores the run ``paused`` (the caller gets a
    :class:`~reactor.model.results.Paused`), releases the run's liveness lock and its
    reactor-level coordination holds, and registers the correlation id. An interrupt has no
    body, no undo and no compensate: a rollback passes over it. A reactor with an interrupt can
    be composed (the root pauses; the step path is ``"<compose step>.<interrupt>"``) but cannot
    be a map element.

    Args:
        wait_for: step names the interrupt comes after (dependencies that pass no data, as on
            ``step``); steps its ``correlation_id`` reads with ``result()`` are dependencies
            too.
        correlation_id: how a resume may name the paused run instead of its id: a template
            (``input("order_id", transform=lambda v: f"order:{v}")``, ``result("reserve",
            "id")``) or a literal string, resolved when the run reaches the interrupt; it must
            be a non-blank string of at most 255 characters, held by no other paused run.
            ``None``: resume by run id only.
        schema: a pydantic model class the payload must validate against (the step's result
            is the model instance); ``None`` accepts any storable value.
        max_attempts: invalid payloads accepted before the run fails (>= 1, default 3); the
            payload that reaches it fails and rolls back the run.
        timeout: seconds the run may stay paused here (positive), or ``None`` for no timeout.
        expiry: ``"lazy"`` (default with a timeout: a resume after the deadline fails and
            rolls back the run) or ``"active"`` (also a delayed job does it at the deadline,
            if the run is still paused).

    Returns:
        A :class:`StepSpec` of kind ``"interrupt"``.

    Raises:
        DefinitionError: an invalid option (see :class:`~reactor.dsl.interrupt.InterruptDecl`).
    """
    options = InterruptDecl(
        schema=schema, max_attempts=max_attempts, timeout=timeout, expiry=expiry
    )
    arguments: dict[str, Template] = {}
    if correlation_id is not None:
        if not isinstance(correlation_id, Template | str):
            raise DefinitionError(
                "interrupt(correlation_id=...) must be a template (input(...), result(...)) "
                f"or a string, got {correlation_id!r}"
            )
        if isinstance(correlation_id, str) and not (
            correlation_id.strip() and len(correlation_id) <= MAX_CORRELATION_ID_LENGTH
        ):
            raise DefinitionError(
                "interrupt(correlation_id=...): a literal correlation id must be a non-blank "
                f"string of at most {MAX_CORRELATION_ID_LENGTH} characters"
            )
        arguments["correlation_id"] = _as_template("correlation_id", correlation_id)
    return StepSpec(
        kind="interrupt", arguments=arguments, wait_for=_names(wait_for), interrupt=options
    )


def sleep(
    seconds: float | None = None,
    *,
    until: datetime | None = None,
    from_input: str | None = None,
    wait_for: str | Iterable[str] | None = None,
) -> StepSpec:
    """Declare a durable sleep: the run parks here until its wake time (docs/schedules.md,
    "Durable sleep").

    Reaching the step with a wake time ahead stores the run ``paused`` with a sleep marker
    (shown as "sleeping until <time>"), releases its liveness lock and its holds, and
    enqueues a ``sleep_wake`` timer job due at the wake time; the run then continues in a
    worker. A wake time already passed completes the step at once. A sleep has no body, no
    undo and no compensate (a rollback passes over it); its result is ``None``. It can be
    composed (the root sleeps) but cannot be a map element.

    Args:
        seconds: the delay, positive and finite, counted from when the run reaches the step.
        until: the wake time, a timezone-aware ``datetime``.
        from_input: the name of a run input holding the delay in seconds or the wake time (a
            timezone-aware ``datetime`` or ISO 8601 text with an offset), read when the run
            reaches the step; a bad value fails the step with
            :class:`~reactor.errors.SleepValueError`.
        wait_for: step names the sleep comes after (as on ``step``).

    Returns:
        A :class:`StepSpec` of kind ``"sleep"``.

    Raises:
        DefinitionError: not exactly one of ``seconds``, ``until`` and ``from_input``, or an
            invalid one (see :class:`~reactor.dsl.sleep.SleepDecl`).
    """
    return StepSpec(
        kind="sleep", wait_for=_names(wait_for),
        sleep=SleepDecl(seconds=seconds, until=until, from_input=from_input),
    )
