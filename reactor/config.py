"""Configuration: which storage and router a process uses, and the engine's settings.

``reactor.configure(storage=..., router=..., **settings)`` takes adapter objects or URLs.
URL schemes map to factories through the entry-point groups ``reactor.storages`` and
``reactor.routers``; a third-party adapter registers the same way as the built-in ones.

**Precedence** (README, "Choosing a backend"): an explicit argument (in code, or a ``reactor``
command's ``--storage``/``--router``/``--setting`` flag, which the command passes as one) wins
over the environment (``REACTOR_STORAGE_URL``, ``REACTOR_ROUTER_URL``, and ``REACTOR_<SETTING>``
for a setting, e.g. ``REACTOR_CONTEXT_TTL``), which wins over the default. Without any
configuration a process uses ``memory://`` and ``local://``, so a fresh install runs with no
server.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, cast, get_args, get_origin
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reactor.errors import ConfigurationError
from reactor.middleware import NO_HOOKS, Hooks, Middleware
from reactor.model.coordination.renewal import MIN_LEASE
from reactor.model.secrets import Keyring, SecretKeys, configured_specs
from reactor.ports.clock import SYSTEM_CLOCK, Clock
from reactor.ports.router import Router
from reactor.ports.storage import Storage
from reactor.ports.urls import redact_url

__all__ = [
    "DEFAULT_ROUTER_URL",
    "DEFAULT_STORAGE_URL",
    "MIDDLEWARE_GROUP",
    "ROUTER_URL_ENV",
    "SETTING_ENV_PREFIX",
    "STORAGE_URL_ENV",
    "Runtime",
    "RuntimeBinder",
    "Settings",
    "configure",
    "current",
    "install_binder",
    "load_adapter_factories",
    "middleware_from_name",
    "reset",
    "resolve_router_url",
    "resolve_settings",
    "resolve_storage_url",
    "router_from_url",
    "settings_from_environment",
    "storage_from_url",
    "swap",
    "url_options",
]

DEFAULT_STORAGE_URL = "memory://"
DEFAULT_ROUTER_URL = "local://"

#: The environment variable naming the storage URL when no explicit one is given.
STORAGE_URL_ENV = "REACTOR_STORAGE_URL"
#: The environment variable naming the router URL when no explicit one is given.
ROUTER_URL_ENV = "REACTOR_ROUTER_URL"
#: A setting ``name`` not passed explicitly is read from ``REACTOR_<NAME>`` (upper case).
SETTING_ENV_PREFIX = "REACTOR_"
#: The entry-point group naming middleware factories (the ``middleware`` setting; the built-in
#: ``otel`` is :class:`reactor.observability.OpenTelemetryMiddleware`).
MIDDLEWARE_GROUP = "reactor.middleware"

#: Which optional extra provides a built-in URL scheme (named in ConfigurationError messages).
_SCHEME_EXTRAS: dict[str, str] = {
    "redis": "redis",
    "rediss": "redis",
    "redis+cluster": "redis",
    "mongodb": "mongodb",
    "mongodb+srv": "mongodb",
    "dynamodb": "dynamodb",
    "sqs": "dynamodb",
}

MIB = 1024 * 1024


class Settings(BaseModel):
    """Engine settings; every duration is in seconds.

    Attributes:
        context_ttl: retention of durable run state after its last write (default 86400).
        context_lock_ttl: TTL of liveness locks (``async:<id>`` etc.) in seconds, at least
            ``MIN_LEASE`` (1 s), renewed every ttl/3 (``docs/coordination.md``, "Renewal").
        lock_snooze_base_delay: base delay of a contention park.
        lock_snooze_jitter: random extra delay added to a park, ``0..jitter``.
        lock_snooze_max_attempts: parks allowed per unit before it gives up (ordered-lock waits
            are exempt); ``None`` = unbounded.
        async_wait_timeout: how long a synchronous reader of an async unit blocks.
        async_park_timeout: total parked time of a reader inside a worker, from dispatch.
        sweeper_interval: seconds between sweep ticks (the recovery-latency bound).
        sweeper_limit: records inspected per sweeper per tick (a tick of the sweep chain reads
            fewer on a slow backend: docs/workers.md, "Back-pressure and pace").
        sweeper_backlog: ready jobs in the router's queue at which a tick of the sweep chain
            re-dispatches nothing (``None``: never defer; docs/workers.md, "Back-pressure and
            pace").
        map_batch_size: fan-out elements dispatched per throw.
        rollback_chunk: positions per distributed-rollback batch and inline rollback chunk.
        max_context_bytes: the largest serialized context accepted before any write.
        checkpoint_min_interval: minimum seconds between per-step checkpoints (0 = every step).
        cancel_check_interval: minimum seconds between two reads of a running run's cancel
            request at its step boundaries (0 = at every boundary; docs/run-control.md,
            "Cancel"): a run of fast steps pays one read per interval, not one per step.
        visibility_timeout: default lease of a delivered job before it is redelivered.
        secret_keys: keys that encrypt redacted values at rest, first = current; each
            base64url of 32 bytes, optionally ``KID:KEY``; empty = ``REACTOR_SECRET_KEYS``
            (docs/security.md, "Keys").
        allow_plaintext_secrets: store redacted values in clear on a non-memory backend when
            no key is configured (logged once as a warning; docs/security.md, "Opting out").
        idempotency_key_ttl: seconds a run idempotency key names its run, counted from the
            run's creation; ``None`` (default) = ``context_ttl``, which also caps it (the
            claims store drops the key then; docs/run-control.md, "Idempotency keys").
        middleware: names of middleware registered in the ``reactor.middleware`` entry-point
            group (e.g. ``otel``) that the runtime runs, in order; ``REACTOR_MIDDLEWARE=otel``
            or ``-s middleware=otel`` (docs/observability.md, "Enabling it").
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    context_ttl: float = Field(86400.0, gt=0)
    context_lock_ttl: float = Field(60.0, ge=MIN_LEASE)
    lock_snooze_base_delay: float = Field(5.0, ge=0)
    lock_snooze_jitter: float = Field(5.0, ge=0)
    lock_snooze_max_attempts: int | None = Field(20, ge=0)
    async_wait_timeout: float = Field(30.0, gt=0)
    async_park_timeout: float | None = Field(3600.0, gt=0)
    sweeper_interval: float = Field(30.0, gt=0)
    sweeper_limit: int = Field(1000, ge=1)
    sweeper_backlog: int | None = Field(1000, ge=1)
    map_batch_size: int = Field(50, ge=1)
    rollback_chunk: int = Field(100, ge=1)
    max_context_bytes: int = Field(64 * MIB, ge=1024)
    checkpoint_min_interval: float = Field(0.0, ge=0)
    cancel_check_interval: float = Field(1.0, ge=0)
    visibility_timeout: float = Field(30.0, gt=0)
    secret_keys: SecretKeys = ()
    allow_plaintext_secrets: bool = False
    idempotency_key_ttl: float | None = Field(None, gt=0)
    middleware: tuple[str, ...] = ()


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


def url_options(url: str) -> tuple[str, dict[str, str]]:
    """Split a backend URL into its scheme and its query options.

    Args:
        url: e.g. ``"local://?workers=2&visibility_timeout=5"``.

    Returns:
        ``(scheme, {option: value})`` with the scheme lower-cased.

    Raises:
        ConfigurationError: the URL has no ``scheme://``.
    """
    if "://" not in url:
        raise ConfigurationError(f"backend URL {redact_url(url)!r} must look like 'scheme://...'")
    parts = urlsplit(url)
    return parts.scheme.lower(), dict(parse_qsl(parts.query, keep_blank_values=True))


def _load_factory(group: str, url: str) -> Callable[..., Any]:
    scheme, _ = url_options(url)
    matches: list[EntryPoint] = [ep for ep in entry_points(group=group) if ep.name == scheme]
    if not matches:
        known = sorted({ep.name for ep in entry_points(group=group)})
        hint = ""
        if scheme in _SCHEME_EXTRAS:
            extra = _SCHEME_EXTRAS[scheme]
            hint = (f"; install it with: pip install -e '.[{extra}]' in a reactor checkout "
                    f"(the distribution reactor-saga[{extra}])")
        raise ConfigurationError(
            f"no {group} adapter registered for URL scheme {scheme!r} "
            f"(registered: {', '.join(known) or 'none'}){hint}"
        )
    try:
        factory = matches[0].load()
    except ImportError as exc:
        extra = _SCHEME_EXTRAS.get(scheme, scheme)
        raise ConfigurationError(
            f"the {scheme!r} adapter needs a missing dependency ({exc.name or exc}); "
            f"install it with: pip install -e '.[{extra}]' in a reactor checkout "
            f"(the distribution reactor-saga[{extra}])"
        ) from exc
    if not callable(factory):
        raise ConfigurationError(f"entry point {matches[0].value!r} in {group} is not callable")
    return cast(Callable[..., Any], factory)


def load_adapter_factories(storage_url: str | None = None, router_url: str | None = None) -> None:
    """Import the adapter modules that serve ``storage_url`` and ``router_url`` now, without
    building anything, so a later :func:`storage_from_url`/:func:`router_from_url` call does no
    import work (the contract suite calls it before its per-test timer starts,
    docs/contract-suite.md, "Per-test timeout").

    Args:
        storage_url: a storage URL, or ``None`` to skip.
        router_url: a router URL, or ``None`` to skip.

    Raises:
        ConfigurationError: unknown scheme or missing optional dependency, as the builders raise.
    """
    if storage_url:
        _load_factory("reactor.storages", storage_url)
    if router_url:
        _load_factory("reactor.routers", router_url)


def storage_from_url(url: str, **settings: Any) -> Storage:
    """Build a storage adapter from a URL through the ``reactor.storages`` entry points.

    Args:
        url: e.g. ``"memory://"``, ``"redis://127.0.0.1:6379/0"``, ``"sqlite:///runs.db"``.
        **settings: engine settings the adapter may use (e.g. ``context_ttl``).

    Raises:
        ConfigurationError: unknown scheme, missing optional dependency, or a factory that
            returned something that is not a :class:`reactor.ports.Storage`.
    """
    storage = _load_factory("reactor.storages", url)(url, **settings)
    if not isinstance(storage, Storage):
        raise ConfigurationError(
            f"the factory for {redact_url(url)!r} did not return a reactor Storage"
        )
    return storage


def router_from_url(url: str, **settings: Any) -> Router:
    """Build a router from a URL through the ``reactor.routers`` entry points.

    Args:
        url: e.g. ``"local://"``, ``"inline://"``, ``"redis://127.0.0.1:6379/0"``,
            ``"sqs://queue-name?region=eu-west-1"``.
        **settings: engine settings the router may use (e.g. ``visibility_timeout``).

    Raises:
        ConfigurationError: unknown scheme, missing optional dependency, or a factory that
            returned something that is not a :class:`reactor.ports.Router`.
    """
    router = _load_factory("reactor.routers", url)(url, **settings)
    if not isinstance(router, Router):
        raise ConfigurationError(
            f"the factory for {redact_url(url)!r} did not return a reactor Router"
        )
    return router


def _resolve_url(explicit: str | None, variable: str, default: str) -> str:
    """``explicit``, else the environment ``variable`` when set and not empty, else ``default``."""
    if explicit is not None:
        return explicit
    return os.environ.get(variable) or default


def resolve_storage_url(explicit: str | None = None) -> str:
    """The storage URL a process uses: ``explicit`` when given, else ``REACTOR_STORAGE_URL``
    when set and not empty, else :data:`DEFAULT_STORAGE_URL` (README, "Choosing a backend").

    Args:
        explicit: a URL from code or from a command's ``--storage`` flag; ``None``: not given.

    Returns:
        The URL (not validated: :func:`storage_from_url` does that).
    """
    return _resolve_url(explicit, STORAGE_URL_ENV, DEFAULT_STORAGE_URL)


def resolve_router_url(explicit: str | None = None) -> str:
    """The router URL a process uses: ``explicit`` when given, else ``REACTOR_ROUTER_URL``
    when set and not empty, else :data:`DEFAULT_ROUTER_URL` (README, "Choosing a backend").

    Args:
        explicit: a URL from code or from a command's ``--router`` flag; ``None``: not given.

    Returns:
        The URL (not validated: :func:`router_from_url` does that).
    """
    return _resolve_url(explicit, ROUTER_URL_ENV, DEFAULT_ROUTER_URL)


def _is_sequence_field(name: str) -> bool:
    """Whether the :class:`Settings` field ``name`` holds a list/tuple/set (env: comma-split)."""
    field = Settings.model_fields.get(name)
    if field is None:
        return False
    annotations = [field.annotation, *get_args(field.annotation)]
    return any(get_origin(a) in (list, tuple, set, frozenset) or a in (list, tuple)
               or get_origin(a) is Sequence for a in annotations)


def settings_from_environment(
    explicit: Mapping[str, Any] | None = None,
) -> dict[str, str | list[str] | None]:
    """The settings the environment sets and ``explicit`` does not (explicit wins).

    A :class:`Settings` field ``name`` is read from ``REACTOR_<NAME>`` (e.g.
    ``REACTOR_CONTEXT_TTL=3600``); an empty variable is ignored, ``none``/``null`` means
    ``None``, and a list-valued field takes comma-separated values (README, "Choosing a
    backend").

    Args:
        explicit: the settings given in code or with ``--setting`` (their names are skipped;
            ``None``: none).

    Returns:
        ``{field: raw value}`` for :func:`configure` to validate.
    """
    found: dict[str, str | list[str] | None] = {}
    for name in Settings.model_fields:
        if explicit is not None and name in explicit:
            continue
        raw = os.environ.get(SETTING_ENV_PREFIX + name.upper())
        if raw is None or not raw.strip():
            continue
        if raw.strip().lower() in ("none", "null"):
            found[name] = None
        elif _is_sequence_field(name):
            found[name] = [part.strip() for part in raw.split(",") if part.strip()]
        else:
            found[name] = raw.strip()
    return found


def _settings(values: Mapping[str, Any], from_env: Collection[str] = ()) -> Settings:
    """Validate ``values`` into :class:`Settings`.

    Raises:
        ConfigurationError: naming each bad field, what it got (hidden for a field whose name
            says ``secret``) and, for a value read from the environment, the variable.
    """
    try:
        return Settings(**values)
    except ValidationError as exc:

        def problem(err: Any) -> str:
            field = str(err["loc"][0]) if err["loc"] else ""
            got = "<hidden>" if "secret" in field else repr(err.get("input"))
            source = f" from {SETTING_ENV_PREFIX}{field.upper()}" if field in from_env else ""
            return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {got}{source})"

        problems = "; ".join(problem(err) for err in exc.errors())
        raise ConfigurationError(f"invalid reactor settings: {problems}") from exc


def resolve_settings(explicit: Mapping[str, Any] | None = None) -> Settings:
    """The settings a process uses: ``explicit`` ones, then ``REACTOR_<SETTING>`` variables,
    then the defaults, validated as :func:`configure` validates them (README, "Choosing a
    backend"), the secret keys included (docs/security.md, "Keys").

    Args:
        explicit: settings from code or from a command's ``--setting`` flags.

    Returns:
        The validated settings.

    Raises:
        ConfigurationError: a setting is invalid (naming the field, and the variable when it
            came from the environment), or a secret key is malformed.
    """
    values = dict(explicit or {})
    from_env = settings_from_environment(values)
    parsed = _settings({**from_env, **values}, from_env)
    source, specs = configured_specs(parsed.secret_keys)
    Keyring(specs, source=source)  # a malformed key fails here, not at the first secret run
    return parsed


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


def middleware_from_name(name: str) -> Middleware:
    """Build the middleware registered as ``name`` in the ``reactor.middleware`` entry-point
    group (its factory is called with no argument; docs/observability.md, "Enabling it").

    Args:
        name: e.g. ``"otel"``.

    Returns:
        The middleware.

    Raises:
        ConfigurationError: no such name, a missing optional dependency (naming the extra),
            or a factory that did not return a :class:`reactor.middleware.Middleware`.
    """
    matches = [ep for ep in entry_points(group=MIDDLEWARE_GROUP) if ep.name == name]
    if not matches:
        known = sorted({ep.name for ep in entry_points(group=MIDDLEWARE_GROUP)})
        raise ConfigurationError(
            f"middleware: no middleware registered as {name!r} in {MIDDLEWARE_GROUP} "
            f"(registered: {', '.join(known) or 'none'})"
        )
    try:
        built = matches[0].load()()
    except ImportError as exc:
        raise ConfigurationError(
            f"middleware: {name!r} needs a missing dependency ({exc.name or exc}); install it "
            f"with: pip install -e '.[{name}]' in a reactor checkout (the distribution "
            f"reactor-saga[{name}])"
        ) from exc
    if not isinstance(built, Middleware):
        raise ConfigurationError(
            f"middleware: the factory registered as {name!r} returned "
            f"{type(built).__name__}, not a reactor.middleware.Middleware"
        )
    return built


def _middleware_items(value: object) -> list[Middleware | str]:
    """Check a ``configure(middleware=...)`` argument: a sequence of
    :class:`~reactor.middleware.Middleware` objects and registered names, or one
    comma-separated string of names (``-s middleware=otel,mine``).

    Raises:
        ConfigurationError: naming ``middleware[i]`` and what it got.
    """
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, Middleware) or not isinstance(value, Sequence):
        raise ConfigurationError(
            "configure(middleware=...) takes a list of reactor.middleware.Middleware objects "
            f"or registered names; got {type(value).__name__}"
        )
    items: list[Middleware | str] = []
    for index, item in enumerate(value):
        if not isinstance(item, Middleware | str) or (isinstance(item, str) and not item):
            raise ConfigurationError(
                f"middleware[{index}]: expected a reactor.middleware.Middleware or a "
                f"registered name, got {type(item).__name__} {item!r:.60}"
            )
        items.append(item)
    return items


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
            here is read from ``REACTOR_<FIELD>`` when set (:func:`settings_from_environment`).

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
    items = None if middleware is None else _middleware_items(middleware)
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
