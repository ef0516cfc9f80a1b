"""The in-process storage and routers: the embedded default and the reference implementation.

``storage_from_url`` and ``router_from_url`` are registered as entry points (groups
``reactor.storages`` and ``reactor.routers`` in ``pyproject.toml``) for the schemes
``memory://``, ``inline://``, ``local://`` and ``memqueue://`` (the bare
:class:`reactor.generic.router.GenericRouter` over a :class:`MemoryQueue`, the reference of
docs/protocol.md, "Building a router").
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import parse_qs, urlsplit

from reactor.errors import ConfigurationError
from reactor.generic.router import GenericRouter
from reactor.memory.clock import ManualClock
from reactor.memory.documents import MemoryDocumentStore
from reactor.memory.probe import MemoryProbe
from reactor.memory.queue import MemoryQueue
from reactor.memory.routers import InlineRouter, LocalRouter
from reactor.memory.signals import MemorySignalStore
from reactor.memory.storage import MemoryStorage
from reactor.ports.urls import redact_url

__all__ = [
    "InlineRouter",
    "LocalRouter",
    "ManualClock",
    "MemoryDocumentStore",
    "MemoryProbe",
    "MemoryQueue",
    "MemorySignalStore",
    "MemoryStorage",
    "router_from_url",
    "storage_from_url",
]


def _query(url: str, scheme: str, allowed: frozenset[str]) -> dict[str, str]:
    parts = urlsplit(url)
    if parts.scheme != scheme:
        raise ConfigurationError(f"expected a {scheme}:// URL, got {redact_url(url)!r}")
    if parts.netloc or parts.path not in ("", "/"):
        raise ConfigurationError(f"{scheme}:// URLs take no host or path, got {redact_url(url)!r}")
    values: dict[str, str] = {}
    for name, found in parse_qs(parts.query, keep_blank_values=True, strict_parsing=False).items():
        if name not in allowed:
            raise ConfigurationError(
                f"unknown {scheme}:// URL parameter {name!r} in {redact_url(url)!r}"
            )
        values[name] = found[-1]
    return values


def _number(name: str, text: Any, *, positive: bool = True) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{name} must be a number, got {text!r}") from exc
    if not math.isfinite(value) or (positive and value <= 0):
        raise ConfigurationError(f"{name} must be a positive number, got {text!r}")
    return value


def _count(name: str, text: Any) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{name} must be an integer, got {text!r}") from exc
    if value < 0:
        raise ConfigurationError(f"{name} must be >= 0, got {text!r}")
    return value


def storage_from_url(url: str, **settings: Any) -> MemoryStorage:
    """Build a :class:`MemoryStorage` from ``memory://`` or ``memory://?context_ttl=SECONDS``.

    A ``prefix`` parameter (the contract suite's per-test namespace) is accepted and ignored:
    every call builds a fresh, private store.

    Args:
        url: the storage URL.
        **settings: engine settings (:class:`reactor.config.Settings` fields); only
            ``context_ttl`` (seconds) is used, the rest is ignored. A ``context_ttl`` in the
            URL wins over the setting.

    Raises:
        ConfigurationError: a wrong scheme, a host/path, an unknown parameter or a bad value.
    """
    query = _query(url, "memory", frozenset({"context_ttl", "prefix"}))
    ttl = query.get("context_ttl", settings.get("context_ttl", 86400.0))
    return MemoryStorage(context_ttl=_number("context_ttl", ttl))


#: In-process worker threads of a ``local://`` router built by ``reactor.configure``.
DEFAULT_LOCAL_WORKERS = 2


def router_from_url(url: str, **settings: Any) -> InlineRouter | LocalRouter | GenericRouter:
    """Build a router from ``inline://``, ``local://?workers=N&visibility_timeout=S`` or
    ``memqueue://?visibility_timeout=S``.

    A ``prefix`` parameter is accepted and ignored (each router is private to its object).
    ``local://`` does not start threads here: ``workers`` (default 2) is kept as
    :attr:`LocalRouter.workers`; :func:`reactor.configure` attaches that many in-process
    :class:`reactor.jobs.worker.Worker` threads, started by the first enqueue
    (``local://?workers=0``: a queue only, jobs are driven by hand). ``memqueue://`` is a
    :class:`~reactor.generic.router.GenericRouter` over a fresh :class:`MemoryQueue`: the same
    queue as ``local://`` without its capabilities (no embedded workers, not declared
    in-process), the generic router as a third-party adapter gets it.

    Args:
        url: the router URL.
        **settings: engine settings; ``visibility_timeout`` (seconds) is used by ``local://``
            and ``memqueue://`` unless the URL sets it; the rest is ignored.

    Raises:
        ConfigurationError: an unknown scheme or parameter, or a bad value.
    """
    scheme = urlsplit(url).scheme
    if scheme == "inline":
        _query(url, "inline", frozenset({"prefix"}))
        return InlineRouter()
    if scheme == "local":
        query = _query(url, "local", frozenset({"workers", "visibility_timeout", "prefix"}))
        visibility = query.get(
            "visibility_timeout", settings.get("visibility_timeout", 30.0)
        )
        return LocalRouter(
            visibility_timeout=_number("visibility_timeout", visibility),
            workers=_count("workers", query.get("workers", DEFAULT_LOCAL_WORKERS)),
        )
    if scheme == "memqueue":
        query = _query(url, "memqueue", frozenset({"visibility_timeout", "prefix"}))
        visibility = query.get(
            "visibility_timeout", settings.get("visibility_timeout", 30.0)
        )
        return GenericRouter(
            MemoryQueue(), visibility_timeout=_number("visibility_timeout", visibility)
        )
    raise ConfigurationError(
        f"the memory routers serve inline://, local:// and memqueue://, got {redact_url(url)!r}"
    )
