"""Configuration: which storage and router a process uses, and the engine's settings.

``reactor.configure(storage=..., router=..., **settings)`` takes adapter objects or URLs
(ARCHITECTURE §6). URL schemes map to factories through the entry-point groups
``reactor.storages`` and ``reactor.routers``; a third-party adapter registers the same way as the
built-in ones. The environment variables ``REACTOR_STORAGE_URL`` and ``REACTOR_ROUTER_URL``
override what the code passes. Without any configuration a process uses ``memory://`` and
``local://``, so a fresh install runs with no server.

Defaults follow ruby_reactor (engine.md §5).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reactor.model.coordination.renewal import MIN_LEASE
from reactor.model.errors import ConfigurationError
from reactor.ports.router import Router
from reactor.ports.storage import Storage

__all__ = [
    "DEFAULT_ROUTER_URL",
    "DEFAULT_STORAGE_URL",
    "Runtime",
    "Settings",
    "configure",
    "current",
    "reset",
    "router_from_url",
    "storage_from_url",
    "url_options",
]

DEFAULT_STORAGE_URL = "memory://"
DEFAULT_ROUTER_URL = "local://"

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
        sweeper_limit: records inspected per sweeper per tick.
        map_batch_size: fan-out elements dispatched per throw.
        rollback_chunk: positions per distributed-rollback batch and inline rollback chunk.
        max_context_bytes: the largest serialized context accepted before any write.
        checkpoint_min_interval: minimum seconds between per-step checkpoints (0 = every step).
        visibility_timeout: default lease of a delivered job before it is redelivered.
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
    map_batch_size: int = Field(50, ge=1)
    rollback_chunk: int = Field(100, ge=1)
    max_context_bytes: int = Field(64 * MIB, ge=1024)
    checkpoint_min_interval: float = Field(0.0, ge=0)
    visibility_timeout: float = Field(30.0, gt=0)


@dataclass(frozen=True)
class Runtime:
    """What the engine uses in this process.

    Attributes:
        storage: the configured :class:`reactor.ports.Storage`.
        router: the configured :class:`reactor.ports.Router`.
        settings: the engine :class:`Settings`.
    """

    storage: Storage
    router: Router
    settings: Settings


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
        raise ConfigurationError(f"backend URL {url!r} must look like 'scheme://...'")
    parts = urlsplit(url)
    return parts.scheme.lower(), dict(parse_qsl(parts.query, keep_blank_values=True))


def _load_factory(group: str, url: str) -> Callable[..., Any]:
    scheme, _ = url_options(url)
    matches: list[EntryPoint] = [ep for ep in entry_points(group=group) if ep.name == scheme]
    if not matches:
        known = sorted({ep.name for ep in entry_points(group=group)})
        hint = ""
        if scheme in _SCHEME_EXTRAS:
            hint = f"; install it with: pip install 'reactor-saga[{_SCHEME_EXTRAS[scheme]}]'"
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
            f"install it with: pip install 'reactor-saga[{extra}]'"
        ) from exc
    if not callable(factory):
        raise ConfigurationError(f"entry point {matches[0].value!r} in {group} is not callable")
    return cast(Callable[..., Any], factory)


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
        raise ConfigurationError(f"the factory for {url!r} did not return a reactor Storage")
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
        raise ConfigurationError(f"the factory for {url!r} did not return a reactor Router")
    return router


def _settings(values: Mapping[str, Any]) -> Settings:
    try:
        return Settings(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {err.get('input')!r})"
            for err in exc.errors()
        )
        raise ConfigurationError(f"invalid reactor settings: {problems}") from exc


def configure(
    storage: Storage | str | None = None,
    router: Router | str | None = None,
    **settings: Any,
) -> Runtime:
    """Configure the process-wide runtime and return it.

    Args:
        storage: a :class:`reactor.ports.Storage` or a URL; ``None`` keeps the default
            (``memory://``). ``REACTOR_STORAGE_URL`` overrides it.
        router: a :class:`reactor.ports.Router` or a URL; ``None`` keeps the default
            (``local://``). ``REACTOR_ROUTER_URL`` overrides it. A router built here from a
            ``local://`` URL gets in-process worker threads (``workers`` option, default 2;
            0 = queue only) that start on the first enqueue and stop when the router is
            closed (:func:`reset` or a reconfigure), see :mod:`reactor.jobs.embedded`.
        **settings: fields of :class:`Settings` (seconds for durations).

    Returns:
        The new :class:`Runtime`. The previous runtime's storage and router are closed when
        this call replaced them.

    Raises:
        ConfigurationError: a bad URL, an unknown scheme, a missing extra, or an invalid
            setting (the message names the field and the problem).
    """
    global _current
    parsed = _settings(settings)
    env_storage = os.environ.get("REACTOR_STORAGE_URL")
    env_router = os.environ.get("REACTOR_ROUTER_URL")
    storage_spec: Storage | str = env_storage or storage or DEFAULT_STORAGE_URL
    router_spec: Router | str = env_router or router or DEFAULT_ROUTER_URL
    adapter_settings = parsed.model_dump()
    built_storage = (
        storage_from_url(storage_spec, **adapter_settings)
        if isinstance(storage_spec, str)
        else storage_spec
    )
    built_router = (
        router_from_url(router_spec, **adapter_settings)
        if isinstance(router_spec, str)
        else router_spec
    )
    runtime = Runtime(storage=built_storage, router=built_router, settings=parsed)
    from reactor.jobs.handlers import bind_inline  # the job handlers import this module

    bind_inline(runtime)  # inline://: jobs run synchronously through the worker's handlers
    if isinstance(router_spec, str):  # local://: the embedded default runs its own workers
        from reactor.jobs.embedded import bind_local_workers

        bind_local_workers(runtime)
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


def reset() -> None:
    """Close and forget the process-wide runtime (tests; the next :func:`current` reconfigures)."""
    global _current
    with _lock:
        previous, _current = _current, None
    if previous is not None:  # the router first: its embedded workers still use the storage
        previous.router.close()
        previous.storage.close()
