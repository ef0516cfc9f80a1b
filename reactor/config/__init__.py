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

One module per job (docs/architecture.md, "Layers"), re-exported here:
:mod:`~reactor.config.settings` (the :class:`Settings` schema),
:mod:`~reactor.config.environment` (``REACTOR_*`` variables and the defaults),
:mod:`~reactor.config.urls` (adapter factories by entry point),
:mod:`~reactor.config.middleware` (middleware by name) and :mod:`~reactor.config.runtime`
(:class:`Runtime`, :func:`configure` and the process-wide runtime). A test that replaces one
of these functions patches the module whose code calls it (``configure`` calls
``reactor.config.runtime``'s names).
"""

from __future__ import annotations

from reactor.config.environment import (
    DEFAULT_ROUTER_URL,
    DEFAULT_STORAGE_URL,
    ROUTER_URL_ENV,
    SETTING_ENV_PREFIX,
    STORAGE_URL_ENV,
    resolve_router_url,
    resolve_settings,
    resolve_storage_url,
    settings_from_environment,
)
from reactor.config.middleware import MIDDLEWARE_GROUP, middleware_from_name
from reactor.config.runtime import (
    Runtime,
    RuntimeBinder,
    configure,
    current,
    install_binder,
    reset,
    swap,
)
from reactor.config.settings import Settings
from reactor.config.urls import (
    load_adapter_factories,
    router_from_url,
    storage_from_url,
    url_options,
)

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
