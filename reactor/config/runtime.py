"""The process's runtime: the storage, router, settings, clock and middleware the engine uses,
built by :func:`configure` and kept as the process-wide singleton (:func:`current`,
:func:`swap`, :func:`reset`).

``reactor.configure(storage=..., router=..., **settings)`` takes adapter objects or URLs
(:mod:`reactor.config.urls`); what is not given comes from the environment, then the defaults
(:mod:`reactor.config.environment`; README, "Choosing a backend"). The settings layer knows
nothing of jobs: the facade installs the job layer's binder (:func:`install_binder`;
docs/architecture.md, "Layers").
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reactor.config.environment import resolve_router_url, resolve_settings, resolve_storage_url
from reactor.config.middleware import middleware_from_name, middleware_items
from reactor.config.settings import Settings
from reactor.config.urls import router_from_url, storage_from_url
from reactor.errors import ConfigurationError
from reactor.middleware import NO_HOOKS, Hooks, Middleware
from reactor.ports.clock import SYSTEM_CLOCK, Clock
from reactor.ports.router import Router
from reactor.ports.storage import Storage

__all__ = [
    "Runtime",
    "RuntimeBinder",
    "configure",
    "current",
    "install_binder",
    "reset",
    "swap",
]


@dataclass(frozen=True)
class Runtime:
    """What the engine uses in this process.

    Attributes:
        storage: the configured :class:`reactor.ports.Storage`.
        router: the configured :class:`reactor.ports.Router`.
        settings: the engine :class:`Settings`.
        clock: the :class:`reactor.ports.Clock` every wait and interval of the engine goes
            through (retry waits, coordination waits, a synchronous reader's wait for an
            ``async_step``, ``DispatchHandle.wait``); default :data:`reactor.ports.SYSTEM_CLOCK`.
            Stored timestamps stay on the storage's own clock (``storage.now()``); see
            docs/testing.md, "The clock".
        middleware: the :class:`reactor.middleware.Middleware` the engine calls, in
            registration order (docs/observability.md, "Middleware").
        hooks: the chain over ``middleware`` the engine calls (derived).
    """

    storage: Storage
    router: Router
    settings: Settings
    clock: Clock = SYSTEM_CLOCK
    middleware: tuple[Middleware, ...] = ()
    hooks: Hooks = dataclasses.field(default=NO_HOOKS, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.middleware:
            object.__setattr__(self, "middleware", tuple(self.middleware))
            object.__setattr__(self, "hooks", Hooks(self.middleware))


_lock = threading.RLock()
_current: Runtime | None = None


def _check_backend_argument(role: str, value: object, protocol: type) -> None:
    """Refuse a ``storage=``/``router=`` argument that is neither ``None``, a URL string nor
    an object satisfying the runtime-checkable ``protocol``.

    Raises:
        ConfigurationError: naming the argument and what it got.
    """
    if value is None or isinstance(value, (str, protocol)):
        return
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise ConfigurationError(
        f"configure({role}=...) takes a {role} URL string (scheme://...) or an object "
        f"implementing reactor.ports.{protocol.__name__}; got {type(value).__name__} {shown}"
    )


#: ``binder(runtime, router_built_from_url)``: what connects a new runtime to the job layer.
RuntimeBinder = Callable[[Runtime, bool], None]

_binder: RuntimeBinder | None = None


def install_binder(binder: RuntimeBinder | None) -> RuntimeBinder | None:
    """Install the function :func:`configure` hands every runtime it builds to.

    The settings layer knows nothing of jobs (docs/architecture.md, "Layers"); the facade
    (``reactor/__init__.py``) installs :func:`reactor.jobs.binding.bind_runtime`, which makes
    an ``inline://`` router run jobs through the worker's handlers and gives a ``local://``
    router built from a URL its embedded workers.

    Args:
        binder: called as ``binder(runtime, router_built_from_url)``; ``None`` removes it.

    Returns:
        The binder that was installed before (``None`` when none was).
    """
    global _binder
    with _lock:
        previous, _binder = _binder, binder
    return previous


def configure(
    storage: Storage | str | None = None,
    router: Router | str | None = None,
    *,
    clock: Clock | None = None,
    middleware: Sequence[Middleware | str] | str | None = None,
    **settings: Any,
) -> Runtime:
    """Configure the process-wide runtime and return it.

    Precedence, for each of the storage, the router and every setting: the explicit argument,
    then the environment, then the default (README, "Choosing a backend").

    Args:
        storage: a :class:`reactor.ports.Storage` or a URL; ``None``: ``REACTOR_STORAGE_URL``
            when set, else ``memory://``.
        router: a :class:`reactor.ports.Router` or a URL; ``None``: ``REACTOR_ROUTER_URL``
            when set, else ``local://``. A router built here from a ``local://`` URL gets
            in-process worker threads (``workers`` option, default 2; 0 = queue only) that
            start on the first enqueue and stop when the router is closed (:func:`reset` or a
            reconfigure), see :mod:`reactor.jobs.embedded` (connected by the binder,
            :func:`install_binder`).
        clock: the :class:`reactor.ports.Clock` the engine waits on and measures intervals
            with (:attr:`Runtime.clock`); ``None``: :data:`reactor.ports.SYSTEM_CLOCK`. A test
            passes a fake one so retry and coordination waits take no real time
            (docs/testing.md, "The clock").
        middleware: the :class:`reactor.middleware.Middleware` the engine calls, in
            registration order (scopes are entered in this order and exited in reverse;
            docs/observability.md, "Middleware"), and/or names registered in the
            ``reactor.middleware`` entry-point group (``"otel"``); a string is a
            comma-separated list of names. ``None``: the ``middleware`` setting
            (``REACTOR_MIDDLEWARE``), else none.
        **settings: fields of :class:`Settings` (seconds for durations); a field not given
            here is read from ``REACTOR_<FIELD>`` when set
            (:func:`reactor.config.environment.settings_from_environment`).

    Returns:
        The new :class:`Runtime`. The previous runtime's storage and router are closed when
        this call replaced them.

    Raises:
        ConfigurationError: a ``storage``/``router`` argument that is neither a URL string
            nor an object satisfying the protocol, a ``clock`` that is not a
            :class:`reactor.ports.Clock`, a ``middleware`` entry that is neither a
            :class:`reactor.middleware.Middleware` nor a registered name, a bad URL, an unknown
            scheme, a missing extra, or an invalid setting (the message names the argument or
            field and what it got). The previous runtime is then left in place, untouched.
    """
    global _current
    _check_backend_argument("storage", storage, Storage)
    _check_backend_argument("router", router, Router)
    if clock is not None and not isinstance(clock, Clock):
        raise ConfigurationError(
            "configure(clock=...) takes an object implementing reactor.ports.Clock (now(), "
            f"monotonic(), sleep(seconds)); got {type(clock).__name__}"
        )
    items = None if middleware is None else middleware_items(middleware)
    if items is not None:  # explicit wins over REACTOR_MIDDLEWARE; the setting keeps the names
        settings = {**settings, "middleware": tuple(i for i in items if isinstance(i, str))}
    parsed = resolve_settings(settings)
    chain = tuple(
        middleware_from_name(item) if isinstance(item, str) else item
        for item in (parsed.middleware if items is None else items)
    )
    storage_spec: Storage | str = (
        resolve_storage_url(storage) if storage is None or isinstance(storage, str) else storage
    )
    router_spec: Router | str = (
        resolve_router_url(router) if router is None or isinstance(router, str) else router
    )
    adapter_settings = parsed.model_dump()
    built_storage = (
        storage_from_url(storage_spec, **adapter_settings)
        if isinstance(storage_spec, str)
        else storage_spec
    )
    try:
        built_router = (
            router_from_url(router_spec, **adapter_settings)
            if isinstance(router_spec, str)
            else router_spec
        )
    except BaseException:
        if isinstance(storage_spec, str):  # built here: nobody else will close it
            built_storage.close()
        raise
    runtime = Runtime(storage=built_storage, router=built_router, settings=parsed,
                      clock=SYSTEM_CLOCK if clock is None else clock, middleware=chain)
    if _binder is not None:  # the job layer: inline handlers, the embedded default's workers
        _binder(runtime, isinstance(router_spec, str))
    with _lock:
        previous, _current = _current, runtime
    if previous is not None:  # the router first: its embedded workers still use the storage
        if previous.router is not built_router:
            previous.router.close()
        if previous.storage is not built_storage:
            previous.storage.close()
    return runtime


def current() -> Runtime:
    """The process-wide runtime, configured with the defaults on first use."""
    with _lock:
        runtime = _current
    if runtime is None:
        with _lock:
            if _current is None:
                configure()
            assert _current is not None
            return _current
    return runtime


def swap(runtime: Runtime | None) -> Runtime | None:
    """Make ``runtime`` the process-wide runtime and return the previous one, closing nothing.

    For harnesses that install a runtime for a while and put the previous one back untouched
    (:class:`reactor.testing.TestEnvironment`; docs/testing.md). ``None`` leaves the process
    unconfigured (the next :func:`current` configures the defaults).

    Args:
        runtime: the runtime to install, or ``None``.

    Returns:
        The runtime that was installed, or ``None`` when there was none.
    """
    global _current
    with _lock:
        previous, _current = _current, runtime
    return previous


def reset() -> None:
    """Close and forget the process-wide runtime (tests; the next :func:`current` reconfigures)."""
    global _current
    with _lock:
        previous, _current = _current, None
    if previous is not None:  # the router first: its embedded workers still use the storage
        previous.router.close()
        previous.storage.close()
