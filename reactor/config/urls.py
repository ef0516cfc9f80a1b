"""Backend URLs: a URL's scheme names the adapter factory registered for it in the entry-point
groups ``reactor.storages`` and ``reactor.routers``; a third-party adapter registers the same
way as the built-in ones (docs/writing-an-adapter.md).

Nothing here knows a scheme: which schemes exist is what the installed distributions register,
and which optional extra a scheme needs, when its import fails, is read from the metadata of
the distribution that registered it (its ``Requires-Dist ...; extra == "<name>"`` lines).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib.metadata import Distribution, EntryPoint, entry_points
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

from reactor.errors import ConfigurationError
from reactor.ports.router import Router
from reactor.ports.storage import Storage
from reactor.ports.urls import redact_url

__all__ = [
    "ROUTERS_GROUP",
    "STORAGES_GROUP",
    "extra_providing",
    "load_adapter_factories",
    "router_from_url",
    "storage_from_url",
    "url_options",
]

#: The entry-point group naming storage factories by URL scheme.
STORAGES_GROUP = "reactor.storages"
#: The entry-point group naming router factories by URL scheme.
ROUTERS_GROUP = "reactor.routers"

#: The distribution of the built-in adapters (its install hint names a checkout too).
_CORE_DISTRIBUTION = "reactor-saga"
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")


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


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_providing(dist: Distribution, module: str) -> str | None:
    """The optional extra of ``dist`` that installs the missing import ``module``.

    Read from the distribution's ``Requires-Dist`` lines: an extra whose requirements name a
    distribution spelled like ``module``'s top-level package (``redis``, ``pymongo``,
    ``boto3``, ``psycopg_pool`` = ``psycopg-pool``); of several, the one with the fewest
    requirements (``redis`` rather than ``all``). Used in the message of a scheme whose adapter
    cannot be imported (README, "Choosing a backend").

    Args:
        dist: the distribution that registered the adapter's entry point.
        module: the dotted name of the module that failed to import.

    Returns:
        The extra's name, or ``None`` when no extra of ``dist`` names it.
    """
    wanted = _normalized(module.split(".", 1)[0])
    sizes: dict[str, int] = {}
    providers: set[str] = set()
    for requirement in dist.requires or ():
        marker = _EXTRA_MARKER.search(requirement)
        name = _REQUIREMENT_NAME.match(requirement)
        if marker is None or name is None:
            continue
        extra = marker.group(1)
        sizes[extra] = sizes.get(extra, 0) + 1
        if _normalized(name.group(1)) == wanted:
            providers.add(extra)
    if not providers:
        return None
    return min(providers, key=lambda extra: (sizes[extra], extra))


def _install_hint(entry: EntryPoint, module: str | None) -> str:
    """``; install it with: ...`` for the extra that provides ``module``, or ``""``."""
    dist = getattr(entry, "dist", None)
    if dist is None or module is None:
        return ""
    extra = extra_providing(dist, module)
    if extra is None:
        return ""
    name = dist.metadata["Name"]
    if name == _CORE_DISTRIBUTION:
        return (f"; install it with: pip install -e '.[{extra}]' in a reactor checkout "
                f"(the distribution {name}[{extra}])")
    return f"; install it with: pip install '{name}[{extra}]'"


def _load_factory(group: str, url: str) -> Callable[..., Any]:
    """The factory registered for ``url``'s scheme in the entry-point ``group``, imported.

    Raises:
        ConfigurationError: no factory registered for the scheme (naming the registered
            ones), its module cannot be imported (naming the missing dependency and, when the
            registering distribution declares it, the extra that installs it), or it is not
            callable.
    """
    scheme, _ = url_options(url)
    registered = list(entry_points(group=group))
    matches: list[EntryPoint] = [ep for ep in registered if ep.name == scheme]
    if not matches:
        known = sorted({ep.name for ep in registered})
        raise ConfigurationError(
            f"no {group} adapter registered for URL scheme {scheme!r} "
            f"(registered: {', '.join(known) or 'none'})"
        )
    try:
        factory = matches[0].load()
    except ImportError as exc:
        raise ConfigurationError(
            f"the {scheme!r} adapter needs a missing dependency ({exc.name or exc})"
            f"{_install_hint(matches[0], exc.name)}"
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
        _load_factory(STORAGES_GROUP, storage_url)
    if router_url:
        _load_factory(ROUTERS_GROUP, router_url)


def storage_from_url(url: str, **settings: Any) -> Storage:
    """Build a storage adapter from a URL through the ``reactor.storages`` entry points.

    Args:
        url: e.g. ``"memory://"``, ``"redis://127.0.0.1:6379/0"``, ``"sqlite:///runs.db"``.
        **settings: engine settings the adapter may use (e.g. ``context_ttl``).

    Returns:
        The storage the scheme's factory built.

    Raises:
        ConfigurationError: unknown scheme, missing optional dependency, or a factory that
            returned something that is not a :class:`reactor.ports.Storage`.
    """
    storage = _load_factory(STORAGES_GROUP, url)(url, **settings)
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

    Returns:
        The router the scheme's factory built.

    Raises:
        ConfigurationError: unknown scheme, missing optional dependency, or a factory that
            returned something that is not a :class:`reactor.ports.Router`.
    """
    router = _load_factory(ROUTERS_GROUP, url)(url, **settings)
    if not isinstance(router, Router):
        raise ConfigurationError(
            f"the factory for {redact_url(url)!r} did not return a reactor Router"
        )
    return router
