"""Coordination declarations: ``with_lock``, ``with_semaphore``, ``with_rate_limit``,
``with_period`` and ``with_ordered_lock``, on a reactor or on a step (docs/coordination.md,
"Declaring").

A declaration is an immutable value, listed in a ``coordination`` class attribute of a
``Reactor`` (reactor level: keyed on the validated reactor inputs) or of a ``Step`` class, or
passed as ``step(..., coordination=[...])`` (step level: keyed on the step's validated inputs) —
the same shape as ``retries = Retries(...)``::

    class Transfer(Reactor):
        account = Input(str)
        coordination = [
            with_lock(key=lambda inputs: f"account:{inputs.account}", ttl=30),
            with_rate_limit("bank-api"),
        ]

    class Charge(Step):
        card = Input(str)
        coordination = [with_semaphore(key="gateway", limit=3)]

A single declaration may be given instead of a list. Each primitive may appear at most once per
reactor or step; declaring one both on a ``Step`` class and inline on ``step(...)`` is a
:class:`~reactor.errors.DefinitionError`. Subclasses inherit their parent's list (plain
class-attribute inheritance) and may replace it.

``key`` is a constant string, or a function ``key(inputs) -> value`` receiving the frozen
:class:`~reactor.dsl.inputs.Inputs` (``inputs.account``); the value is used as ``str(value)``.
Without ``key`` the key is the reactor's registered name (reactor level) or
``"<reactor>.<step>"`` (step level; the Step class's qualified name for a direct
``Step.call``). A named rate limit without ``key`` uses its name, so every user of the name
shares one bucket. Keys are used verbatim as storage keys, so a ``with_lock(key="k")`` and a
hand-made ``reactor.coordination.Lock(storage.locks, "k")`` exclude each other.

The runtime that takes and releases these holds is :mod:`reactor.engine.coordination`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from reactor.coordination.rate_limit import registry, windows_from
from reactor.dsl.inputs import Inputs
from reactor.errors import CoordinationKeyError, DefinitionError
from reactor.model.coordination.periods import Every, ttl_seconds
from reactor.model.coordination.renewal import validate_lease
from reactor.model.records import RateWindow

__all__ = [
    "Coordination",
    "KeySource",
    "LockDecl",
    "OrderedLockDecl",
    "PeriodDecl",
    "Primitive",
    "RateLimitDecl",
    "SemaphoreDecl",
    "merge_coordination",
    "normalize_coordination",
    "with_lock",
    "with_ordered_lock",
    "with_period",
    "with_rate_limit",
    "with_semaphore",
]

#: The five primitives, by name.
Primitive = Literal["lock", "semaphore", "rate_limit", "period", "ordered_lock"]

#: Where a key comes from: ``None`` (the default key), a constant, or ``fn(inputs)``.
KeySource = str | Callable[[Inputs], Any] | None

#: Default seconds a rollback waits to re-take a step's semaphore (docs/coordination.md,
#: "Rollback").
DEFAULT_SEMAPHORE_ROLLBACK_WAIT = 60.0


def _non_negative(what: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise DefinitionError(f"{what} must be a number of seconds >= 0, got {value!r}")
    return float(value)


def _positive(what: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise DefinitionError(f"{what} must be a number of seconds > 0, got {value!r}")
    return float(value)


def _lease(what: str, value: float) -> float:
    """A renewed lease: at least ``MIN_LEASE`` seconds (``docs/coordination.md``, "Renewal")."""
    try:
        return validate_lease(what, value)
    except ValueError as exc:
        raise DefinitionError(str(exc)) from None


@dataclass(frozen=True)
class Coordination:
    """Base of the five declarations.

    Attributes:
        key: see :data:`KeySource`.
        primitive: which primitive this declares (class constant).
    """

    key: KeySource = None
    primitive: ClassVar[Primitive]

    def __post_init__(self) -> None:
        if self.key is not None and not isinstance(self.key, str) and not callable(self.key):
            raise DefinitionError(
                f"with_{self.primitive}(key=...) must be a string or a function of the inputs, "
                f"got {self.key!r}"
            )

    def resolve_key(self, inputs: Mapping[str, Any], default: str) -> str:
        """The concrete key for ``inputs``.

        Args:
            inputs: the validated inputs (reactor inputs or step inputs) by name.
            default: the key used when the declaration has no ``key``.

        Returns:
            The key string.

        Raises:
            CoordinationKeyError: the key function raised or returned ``None`` or ``""``
                (a permanent error: the unit fails without being retried or parked).
        """
        if self.key is None:
            return default
        if isinstance(self.key, str):
            return self.key
        try:
            value = self.key(Inputs(inputs))
        except Exception as exc:
            raise CoordinationKeyError(
                f"the key function of with_{self.primitive} raised {type(exc).__name__}: {exc}"
            ) from exc
        if value is None or value == "":
            raise CoordinationKeyError(f"the key function of with_{self.primitive} returned "
                                       f"{value!r}")
        return str(value)


@dataclass(frozen=True)
class LockDecl(Coordination):
    """``with_lock``: mutual exclusion, re-entrant across one run's compose tree.

    Attributes:
        ttl: seconds the lock lives unless extended.
        wait: seconds a synchronous caller polls a held lock before failing (0 = one try).
        auto_extend: extend the lock every ``max(ttl/3, 1)`` s while held.
        rollback_wait: seconds a synchronous rollback waits to re-take the lock (default:
            ``ttl``); in a worker the rollback parks until it is free (docs/coordination.md,
            "Rollback").
    """

    ttl: float = 60.0
    wait: float = 0.0
    auto_extend: bool = True
    rollback_wait: float | None = None
    primitive: ClassVar[Primitive] = "lock"

    @property
    def effective_rollback_wait(self) -> float:
        """``rollback_wait``, or the lock TTL."""
        return self.ttl if self.rollback_wait is None else self.rollback_wait


@dataclass(frozen=True)
class SemaphoreDecl(Coordination):
    """``with_semaphore``: at most ``limit`` concurrent holders (one lease per holder).

    Attributes:
        limit: the number of slots.
        wait: seconds a synchronous caller polls a full semaphore before failing.
        lease: seconds a slot stays leased without an extend (auto-extended while held).
        rollback_wait: seconds a synchronous rollback waits to re-take a slot (default 60);
            in a worker the rollback parks until one is free (docs/coordination.md,
            "Rollback").
    """

    limit: int = 1
    wait: float = 0.0
    lease: float = 60.0
    rollback_wait: float | None = None
    primitive: ClassVar[Primitive] = "semaphore"

    @property
    def effective_rollback_wait(self) -> float:
        """``rollback_wait``, or 60 seconds."""
        return DEFAULT_SEMAPHORE_ROLLBACK_WAIT if self.rollback_wait is None else self.rollback_wait


@dataclass(frozen=True)
class RateLimitDecl(Coordination):
    """``with_rate_limit``: fixed windows, all checked and charged at once.

    Attributes:
        name: a limit registered in :data:`reactor.coordination.registry` (resolved at run
            time; an unknown name fails the unit permanently), or ``None``.
        windows: the windows of an inline limit (empty for a named one).
    """

    name: str | None = None
    windows: tuple[RateWindow, ...] = ()
    primitive: ClassVar[Primitive] = "rate_limit"

    def resolve_windows(self) -> tuple[RateWindow, ...]:
        """The windows to charge (looked up in the registry for a named limit).

        Raises:
            UnknownRateLimitError: the named limit is not registered.
        """
        if self.name is None:
            return self.windows

        return registry.windows(self.name)


@dataclass(frozen=True)
class PeriodDecl(Coordination):
    """``with_period``: at most one plain ``Success`` per calendar bucket.

    Attributes:
        every: ``"minute"``, ``"hour"``, ``"day"``, ``"week"``, ``"month"``, ``"year"`` or a
            whole number of seconds.
    """

    every: Every = "day"
    primitive: ClassVar[Primitive] = "period"


@dataclass(frozen=True)
class OrderedLockDecl(Coordination):
    """``with_ordered_lock``: units go strictly in ticket order.

    Attributes:
        poison_pill_timeout: seconds after which a silent blocker is skipped.
        ttl: seconds an idle line keeps its state.
        strict: after a failure, later tickets halt (``ordered_lock_chain_failed``).
    """

    poison_pill_timeout: float = 600.0
    ttl: float = 86400.0
    strict: bool = True
    primitive: ClassVar[Primitive] = "ordered_lock"


def with_lock(
    key: KeySource = None,
    *,
    ttl: float = 60.0,
    wait: float = 0.0,
    auto_extend: bool = True,
    rollback_wait: float | None = None,
) -> LockDecl:
    """Declare an exclusive lock (docs/protocol.md#locks).

    The owner is the run's root context id, so a run re-enters its own lock from composed
    children; a direct ``Step.call`` with a step context re-enters its run's lock too.

    Args:
        key: see :data:`KeySource`.
        ttl: seconds the lock lives unless extended (default 60); at least
            :data:`~reactor.model.coordination.renewal.MIN_LEASE` (1 s) when auto-extended.
        wait: seconds (>= 0) a synchronous caller waits for a held lock (default 0: one try).
            Inside a worker contention parks instead.
        auto_extend: extend every ``ttl/3`` seconds while held (default ``True``); a hold
            lost anyway fails the step with ``LockLost`` before its result is recorded.
        rollback_wait: seconds a synchronous rollback waits to re-take a step's lock (default
            ``ttl``); in a worker the rollback parks until it is free (docs/coordination.md,
            "Rollback").

    Returns:
        A :class:`LockDecl`.

    Raises:
        DefinitionError: a value is out of range.
    """
    return LockDecl(
        key=key,
        ttl=_lease("with_lock(ttl=)", ttl) if auto_extend else _positive("with_lock(ttl=)", ttl),
        wait=_non_negative("with_lock(wait=)", wait),
        auto_extend=bool(auto_extend),
        rollback_wait=None if rollback_wait is None
        else _non_negative("with_lock(rollback_wait=)", rollback_wait),
    )


def with_semaphore(
    key: KeySource = None,
    *,
    limit: int,
    wait: float = 0.0,
    lease: float = 60.0,
    rollback_wait: float | None = None,
) -> SemaphoreDecl:
    """Declare a counting semaphore (docs/protocol.md#semaphores: one lease per holder token).

    Not re-entrant: a composed child declaring the same semaphore takes a second slot.

    Args:
        key: see :data:`KeySource`.
        limit: concurrent holders allowed (>= 1).
        wait: seconds (>= 0) a synchronous caller waits for a slot (default 0: one try).
        lease: seconds a slot stays leased without an extend (default 60, at least
            :data:`~reactor.model.coordination.renewal.MIN_LEASE`); renewed every ``lease/3``
            while held, and a lease lost anyway fails the step with ``LockLost``.
        rollback_wait: seconds a synchronous rollback waits to re-take a step's slot (default
            60); in a worker the rollback parks until one is free (docs/coordination.md,
            "Rollback").

    Returns:
        A :class:`SemaphoreDecl`.

    Raises:
        DefinitionError: a value is out of range.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise DefinitionError(f"with_semaphore(limit=) must be an int >= 1, got {limit!r}")
    return SemaphoreDecl(
        key=key,
        limit=limit,
        wait=_non_negative("with_semaphore(wait=)", wait),
        lease=_lease("with_semaphore(lease=)", lease),
        rollback_wait=None if rollback_wait is None
        else _non_negative("with_semaphore(rollback_wait=)", rollback_wait),
    )


def with_rate_limit(
    name: str | None = None,
    /,
    *,
    key: KeySource = None,
    limit: int | None = None,
    period: float | str | None = None,
    limits: Mapping[str | float, int] | None = None,
) -> RateLimitDecl:
    """Declare a rate limit (docs/protocol.md#rate-limits).

    Three forms: ``with_rate_limit(key=..., limit=10, period="minute")`` (``period`` in
    seconds or a window name), ``with_rate_limit(key=..., limits={"second": 3, "minute":
    100})``, or a named limit ``with_rate_limit("stripe")`` registered with
    ``reactor.coordination.registry.register("stripe", ...)`` (looked up at run time; an
    unknown name is a permanent failure, never parked).

    Args:
        name: a registered limit's name (positional).
        key: see :data:`KeySource` (default for a named limit: its name).
        limit: admissions per ``period``.
        period: the window: seconds or ``"second"``/``"minute"``/``"hour"``/``"day"``.
        limits: ``{window: limit}`` for several windows at once.

    Returns:
        A :class:`RateLimitDecl`.

    Raises:
        DefinitionError: a name combined with windows, no form given, or a bad window.
    """
    if name is not None:
        if limit is not None or period is not None or limits is not None:
            raise DefinitionError("with_rate_limit(name) takes no limit=/period=/limits=")
        if not isinstance(name, str) or not name:
            raise DefinitionError(f"with_rate_limit(name) must be a non-empty string: {name!r}")
        return RateLimitDecl(key=key if key is not None else name, name=name)
    if period is not None and limit is None:
        raise DefinitionError("with_rate_limit(period=) needs limit=")
    try:
        windows = windows_from(limit, period, limits)
    except ValueError as exc:
        raise DefinitionError(f"with_rate_limit: {exc}") from exc
    for window in windows:
        if isinstance(window.limit, bool) or not isinstance(window.limit, int) or window.limit < 1:
            raise DefinitionError(f"with_rate_limit: limit must be an int >= 1, got "
                                  f"{window.limit!r}")
        if window.seconds <= 0:
            raise DefinitionError(f"with_rate_limit: window must be > 0 seconds: {window}")
    return RateLimitDecl(key=key, windows=windows)


def with_period(key: KeySource = None, *, every: Every) -> PeriodDecl:
    """Declare "at most once per calendar bucket" (docs/protocol.md#periods).

    At reactor level a repeat run in a marked bucket returns ``Halt(reason="period")``; at step
    level the step is ``Skipped`` instead. The bucket is marked only after a plain
    ``Success``. Pair it with ``with_lock`` on the same key for strict at-most-once.

    Args:
        key: see :data:`KeySource`.
        every: ``"minute"``, ``"hour"``, ``"day"``, ``"week"``, ``"month"``, ``"year"`` or a
            whole number of seconds.

    Returns:
        A :class:`PeriodDecl`.

    Raises:
        DefinitionError: ``every`` is not a known period.
    """
    try:
        ttl_seconds(every)
    except (TypeError, ValueError) as exc:
        raise DefinitionError(f"with_period(every={every!r}): {exc}") from exc
    return PeriodDecl(key=key, every=every)


def with_ordered_lock(
    key: KeySource = None,
    *,
    poison_pill_timeout: float = 600.0,
    ttl: float = 86400.0,
    strict: bool = True,
) -> OrderedLockDecl:
    """Declare strict ticket ordering (docs/protocol.md#ordered-locks).

    At reactor level the ticket is assigned when the run is created (at enqueue time for a
    background run); at step level, on first arrival at the step. A synchronous caller out of
    turn fails with :class:`~reactor.errors.OrderedLockWaitError`; inside a worker it
    parks (uncapped).

    Args:
        key: see :data:`KeySource`.
        poison_pill_timeout: seconds before a silent blocker is skipped (default 600, at
            least :data:`~reactor.model.coordination.renewal.MIN_LEASE`); the holder
            re-stamps its timer every third of it.
        ttl: seconds (> 0) an idle line keeps its state (default 86400).
        strict: after a failure, later tickets halt with ``ordered_lock_chain_failed``.

    Returns:
        An :class:`OrderedLockDecl`.

    Raises:
        DefinitionError: a value is out of range.
    """
    return OrderedLockDecl(
        key=key,
        poison_pill_timeout=_lease("with_ordered_lock(poison_pill_timeout=)",
                                   poison_pill_timeout),
        ttl=_positive("with_ordered_lock(ttl=)", ttl),
        strict=bool(strict),
    )


def normalize_coordination(value: Any, owner: str) -> tuple[Coordination, ...]:
    """Turn a ``coordination`` attribute/argument into a checked tuple.

    Args:
        value: ``None``, one declaration, or an iterable of declarations.
        owner: the declaring class or step (for messages).

    Returns:
        The declarations, in declaration order.

    Raises:
        DefinitionError: an entry is not a ``with_*`` declaration, or a primitive appears twice.
    """
    if value is None:
        return ()
    items: Iterable[Any] = (value,) if isinstance(value, Coordination) else value
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise DefinitionError(
            f"{owner}: coordination must be a with_*(...) declaration or a list of them"
        )
    out: list[Coordination] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, Coordination):
            raise DefinitionError(
                f"{owner}: coordination entries must be with_lock/with_semaphore/"
                f"with_rate_limit/with_period/with_ordered_lock(...), got {item!r}"
            )
        if item.primitive in seen:
            raise DefinitionError(f"{owner}: with_{item.primitive} is declared twice")
        seen.add(item.primitive)
        out.append(item)
    return tuple(out)


def merge_coordination(
    class_decls: tuple[Coordination, ...], inline: tuple[Coordination, ...], owner: str
) -> tuple[Coordination, ...]:
    """Combine a Step class's declarations with a ``step(..., coordination=)`` list.

    Raises:
        DefinitionError: a primitive is declared both on the class and inline
            (docs/coordination.md, "Declaring").
    """
    both = {d.primitive for d in class_decls} & {d.primitive for d in inline}
    if both:
        raise DefinitionError(
            f"{owner}: {', '.join(sorted('with_' + p for p in both))} declared both on the "
            "Step class and inline"
        )
    return class_decls + inline
