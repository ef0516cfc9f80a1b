"""Fault injection: make a step raise on chosen attempts, make the storage raise.

Both are armed through a :class:`reactor.testing.TestEnvironment` (``env.fail_step(...)``,
``env.storage_fails(...)``) and disarmed when it closes, so a test never patches reactor's
modules itself (docs/testing.md, "Injecting faults").

* A **step fault** replaces the step's body, for one reactor's step only, by one that raises
  on the chosen attempts and otherwise runs the real body. The raise happens where the body
  would run, so the engine sees an ordinary step failure: the step's ``Retries`` apply, then
  its ``compensate`` and the rollback of the completed steps.
* A **storage fault** counts the calls the engine makes to the storage (optionally one
  sub-store, or one of its methods, such as ``"contexts.save"``) and makes the chosen calls
  raise :class:`reactor.StorageError`, as an outage of the backend would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from reactor.dsl.declarations import StepSpec
from reactor.errors import StorageError
from reactor.facade import Reactor
from reactor.model.step_context import StepContext
from reactor.ports.storage import Storage
from reactor.testing.errors import InjectedFault

__all__ = ["STORE_NAMES", "StepFault", "StorageFault"]

#: The storage's sub-stores a storage fault can target (``method="contexts"`` or
#: ``method="contexts.save"``); ``sweep_cursors``, ``schedules`` and ``signals`` only when the
#: storage has them.
STORE_NAMES: tuple[str, ...] = (
    "contexts",
    "step_results",
    "maps",
    "map_rollbacks",
    "claims",
    "locks",
    "semaphores",
    "rate_limits",
    "periods",
    "ordered_locks",
    "sweep_cursors",
    "schedules",
    "signals",
)

ErrorSpec = BaseException | type[BaseException] | None


def _attempts(on_attempt: int | Collection[int] | None) -> frozenset[int] | None:
    if on_attempt is None:
        return None
    numbers = frozenset([on_attempt] if isinstance(on_attempt, int) else on_attempt)
    if not numbers or any(isinstance(n, bool) or not isinstance(n, int) or n < 1
                          for n in numbers):
        raise ValueError(f"on_attempt must be attempt numbers >= 1 (or None), got {on_attempt!r}")
    return numbers


def _build_error(error: ErrorSpec, default: Callable[[str], BaseException], message: str
                 ) -> BaseException:
    if error is None:
        return default(message)
    if isinstance(error, type):
        return error(message)
    return error


# ------------------------------------------------------------------------------- step faults


@dataclass(eq=False)
class StepFault:
    """A step armed to fail (returned by :meth:`reactor.testing.TestEnvironment.fail_step`).

    Attributes:
        reactor: the registered name of the reactor whose step fails.
        step: the step's name.
        attempts: the attempt numbers (1-based) that fail; ``None``: every attempt.
        raised: how many times the fault raised so far.
        seen: the attempt numbers the step's body was entered with, oldest first.
    """

    reactor: str
    step: str
    attempts: frozenset[int] | None
    error: ErrorSpec = None
    raised: int = 0
    seen: list[int] = field(default_factory=list)
    active: bool = True

    def remove(self) -> None:
        """Disarm the fault: later attempts run the real body."""
        self.active = False

    def _check(self, ctx: StepContext | None) -> None:
        """Raise the injected error when ``ctx`` is an attempt this fault makes fail."""
        if not self.active or ctx is None or ctx.reactor != self.reactor:
            return
        self.seen.append(ctx.attempt)
        if self.attempts is not None and ctx.attempt not in self.attempts:
            return
        self.raised += 1
        raise _build_error(
            self.error, InjectedFault,
            f"injected failure of step {self.step!r} of {self.reactor!r} "
            f"on attempt {ctx.attempt}",
        )


class _StepPatch:
    """The replaced body of one step of one reactor, consulted by every fault on that step."""

    def __init__(self, spec: StepSpec) -> None:
        self.spec = spec
        self.faults: list[StepFault] = []
        self.original_class = spec.step_class
        self.original_function = spec.function
        if spec.step_class is not None:
            original = spec.step_class
            patch = self

            def run(step_self: Any) -> Any:
                patch.check(step_self.context)
                return original.run(step_self)

            spec.step_class = type(
                original.__name__, (original,),
                {"run": run, "__module__": original.__module__,
                 "__qualname__": original.__qualname__, "__doc__": original.__doc__},
            )
        else:
            function = spec.function
            assert function is not None

            def body(inputs: Any, ctx: Any) -> Any:
                self.check(ctx)
                return function(inputs, ctx)

            spec.function = body

    def check(self, ctx: StepContext | None) -> None:
        for fault in self.faults:
            fault._check(ctx)

    def restore(self) -> None:
        self.spec.step_class = self.original_class
        self.spec.function = self.original_function


class StepFaults:
    """Every step patch of one environment (restored by :meth:`restore_all`)."""

    def __init__(self) -> None:
        self._patches: dict[tuple[int, str], _StepPatch] = {}

    def arm(
        self,
        reactor: type[Reactor],
        step: str,
        on_attempt: int | Collection[int] | None,
        error: ErrorSpec,
    ) -> StepFault:
        """Arm a fault on ``reactor``'s ``step`` (see ``TestEnvironment.fail_step``).

        Raises:
            TypeError: ``reactor`` is not a Reactor class.
            ValueError: no such step, not a leaf step, or bad ``on_attempt``.
        """
        if not (isinstance(reactor, type) and issubclass(reactor, Reactor)):
            raise TypeError(f"fail_step takes a Reactor subclass, got {reactor!r}")
        definition = reactor.definition
        spec = definition.steps.get(step)
        if spec is None:
            raise ValueError(
                f"{definition.name!r} has no step {step!r} "
                f"(steps: {', '.join(definition.steps) or 'none'})"
            )
        if spec.kind not in ("step", "async_step"):
            raise ValueError(
                f"step {step!r} of {definition.name!r} is a {spec.kind} step: inject the "
                "fault into a step of the child or element reactor instead"
            )
        attempts = _attempts(on_attempt)
        key = (id(spec), definition.name)
        patch = self._patches.get(key)
        if patch is None:
            patch = self._patches[key] = _StepPatch(spec)
        fault = StepFault(reactor=definition.name, step=step, attempts=attempts, error=error)
        patch.faults.append(fault)
        return fault

    def restore_all(self) -> None:
        """Put every patched step's own body back; the faults stay disarmed."""
        for patch in reversed(list(self._patches.values())):
            for fault in patch.faults:
                fault.remove()
            patch.restore()
        self._patches.clear()


# ---------------------------------------------------------------------------- storage faults


@dataclass(eq=False)
class StorageFault:
    """Storage calls armed to fail (returned by
    :meth:`reactor.testing.TestEnvironment.storage_fails`).

    Attributes:
        method: what is counted: ``None`` (every storage call), a sub-store (``"contexts"``)
            or one method of it (``"contexts.save"``).
        on_call: the first counted call (1-based) that raises.
        times: how many consecutive counted calls raise from there.
        calls: the counted calls so far, each as ``"store.method"``, oldest first.
        raised: how many calls raised so far.
    """

    method: str | None
    on_call: int
    times: int
    error: ErrorSpec = None
    calls: list[str] = field(default_factory=list)
    raised: int = 0
    active: bool = True

    @property
    def exhausted(self) -> bool:
        """Whether every call the fault was armed for has raised."""
        return self.raised >= self.times

    def remove(self) -> None:
        """Disarm the fault: later calls reach the storage."""
        self.active = False

    def _matches(self, store: str, method: str) -> bool:
        if self.method is None:
            return True
        return self.method in (store, f"{store}.{method}")

    def _check(self, store: str, method: str) -> None:
        if not self.active or not self._matches(store, method):
            return
        self.calls.append(f"{store}.{method}")
        number = len(self.calls)
        if self.on_call <= number < self.on_call + self.times:
            self.raised += 1
            raise _build_error(
                self.error, StorageError,
                f"injected storage failure on call {number} of "
                f"{self.method or 'the storage'} ({store}.{method})",
            )


class _InterceptedStore:
    """A sub-store whose method calls pass :class:`StorageFaults` first."""

    def __init__(self, inner: Any, name: str, faults: StorageFaults) -> None:
        self._inner = inner
        self._name = name
        self._faults = faults

    def __getattr__(self, attribute: str) -> Any:
        found = getattr(self._inner, attribute)
        if attribute.startswith("_") or not callable(found):
            return found
        faults, store = self._faults, self._name

        def call(*args: Any, **kwargs: Any) -> Any:
            faults.check(store, attribute)
            return found(*args, **kwargs)

        return call


class StorageFaults:
    """The storage faults of one environment and the interception they need."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._faults: list[StorageFault] = []
        self._originals: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _stores(self) -> list[str]:
        return [name for name in STORE_NAMES if getattr(self._storage, name, None) is not None]

    def arm(self, on_call: int, method: str | None, times: int, error: ErrorSpec
            ) -> StorageFault:
        """Arm a storage fault (see ``TestEnvironment.storage_fails``).

        Raises:
            ValueError: ``on_call`` or ``times`` below 1, or ``method`` names no sub-store
                or no method of it.
        """
        if isinstance(on_call, bool) or on_call < 1:
            raise ValueError(f"on_call must be >= 1, got {on_call!r}")
        if isinstance(times, bool) or times < 1:
            raise ValueError(f"times must be >= 1, got {times!r}")
        stores = self._stores()
        if method is not None:
            store, _, name = method.partition(".")
            if store not in stores:
                raise ValueError(
                    f"method must name a storage sub-store ({', '.join(stores)}), "
                    f"optionally with a method ('contexts.save'), got {method!r}"
                )
            if name and not callable(getattr(getattr(self._storage, store), name, None)):
                raise ValueError(f"the {store} store has no method {name!r}")
        fault = StorageFault(method=method, on_call=on_call, times=times, error=error)
        with self._lock:
            self._faults.append(fault)
            for name in stores:
                if name not in self._originals:
                    self._originals[name] = getattr(self._storage, name)
                    setattr(self._storage, name,
                            _InterceptedStore(self._originals[name], name, self))
        return fault

    def check(self, store: str, method: str) -> None:
        """Count one call of ``store.method`` and raise when a fault says so."""
        with self._lock:
            faults = list(self._faults)
        for fault in faults:
            fault._check(store, method)

    def restore_all(self) -> None:
        """Disarm every fault and give the storage its own sub-stores back."""
        with self._lock:
            for fault in self._faults:
                fault.remove()
            for name, original in self._originals.items():
                setattr(self._storage, name, original)
            self._originals.clear()


