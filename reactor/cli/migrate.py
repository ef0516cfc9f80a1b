"""``reactor migrate``: bring the storage's (and the router's) schema up to date
(docs/workers.md, "Running workers"; the PostgreSQL schema: docs/adapters/postgres.md, "Schema
and migration").

A backend that declares :class:`reactor.ports.capabilities.Migrates` applies the migrations its
schema lacks (idempotent; processes migrating at once apply each once); any other backend has
nothing to migrate and says so. Run it before a deployment whose URLs say ``migrate=never``
(the application's role then needs no right to create tables). Exit 0 when every backend is up
to date, 1 when one failed (one stderr line naming it), 2 for a bad URL or setting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from reactor import config
from reactor.cli._common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    RouterOpt,
    SettingOpt,
    StorageOpt,
    _adapter_settings,
    app,
    console,
    display_url,
    fail,
)
from reactor.errors import ConfigurationError, ReactorError
from reactor.ports.capabilities import Migrates, declares

__all__ = ["migrate"]


def _build(role: str, url: str, build: Callable[[], Any]) -> Any:
    """The backend, or exit 2 naming the bad URL."""
    try:
        return build()
    except ConfigurationError as exc:
        fail(f"bad {role} URL {display_url(url)}: {exc}", EXIT_USAGE)


def _migrate_one(role: str, url: str, backend: Any) -> None:
    shown = display_url(url)
    if not declares(backend, Migrates):
        console.print(f"{role} {shown}: nothing to migrate ({type(backend).__name__})",
                      markup=False, soft_wrap=True)
        return
    try:
        applied = cast(Migrates, backend).migrate()
    except ReactorError as exc:
        reason = " ".join(str(exc).split())
        fail(f"{role} {shown} migration failed: {type(exc).__name__}: {reason}", EXIT_FAILURE)
    done = f"applied {', '.join(map(str, applied))}" if applied else "already up to date"
    console.print(f"{role} {shown}: {done}", markup=False, soft_wrap=True)


@app.command()
def migrate(
    storage: StorageOpt = None,
    router: RouterOpt = None,
    setting: SettingOpt = None,
) -> None:
    """Bring the storage's (and the router's, when one is named) schema up to date.

    A backend with a versioned schema (PostgreSQL) applies the migrations it lacks, in one
    transaction, once even when several processes run it; others have nothing to migrate.
    Exit 0 up to date, 1 a backend failed, 2 bad URL or setting. See
    docs/adapters/postgres.md, "Schema and migration".
    """
    settings = _adapter_settings(setting)
    pool_log = logging.getLogger("psycopg.pool")
    level = pool_log.level
    # a pool connecting in the background repeats the cause this command prints once
    pool_log.setLevel(logging.CRITICAL)
    try:
        _migrate_all(storage, router, settings)
    finally:
        pool_log.setLevel(level)


def _migrate_all(storage: str | None, router: str | None, settings: dict[str, Any]) -> None:
    storage_url = config.resolve_storage_url(storage)
    router_url = router
    if router_url is None and config.resolve_router_url() != config.DEFAULT_ROUTER_URL:
        router_url = config.resolve_router_url()
    named = router_url
    # every URL is judged before anything is migrated
    targets = [("storage", storage_url, _build(
        "storage", storage_url, lambda: config.storage_from_url(storage_url, **settings)))]
    try:
        if named is not None:
            targets.append(("router", named, _build(
                "router", named, lambda: config.router_from_url(named, **settings))))
        for role, url, backend in targets:
            _migrate_one(role, url, backend)
    finally:
        for _, _, backend in targets:
            try:
                backend.close()
            except Exception:  # closing after a migration is best effort
                pass
