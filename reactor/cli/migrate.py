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


def _migrate_one(role: str, url: str, build: Callable[[], Any]) -> None:
    shown = display_url(url)
    try:
        backend = build()
    except ConfigurationError as exc:
        fail(f"bad {role} URL {shown}: {exc}", EXIT_USAGE)
    try:
        if not declares(backend, Migrates):
            console.print(f"{role} {shown}: nothing to migrate ({type(backend).__name__})",
                          markup=False, soft_wrap=True)
            return
        try:
            applied = cast(Migrates, backend).migrate()
        except ReactorError as exc:
            reason = " ".join(str(exc).split())
            fail(f"{role} {shown} migration failed: {type(exc).__name__}: {reason}",
                 EXIT_FAILURE)
        done = f"applied {', '.join(map(str, applied))}" if applied else "already up to date"
        console.print(f"{role} {shown}: {done}", markup=False, soft_wrap=True)
    finally:
        try:
            backend.close()
        except Exception:  # closing after a migration is best effort
            pass


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
    storage_url = config.resolve_storage_url(storage)
    _migrate_one("storage", storage_url,
                 lambda: config.storage_from_url(storage_url, **settings))
    router_url = router
    if router_url is None and config.resolve_router_url() != config.DEFAULT_ROUTER_URL:
        router_url = config.resolve_router_url()
    if router_url is not None:
        named = router_url
        _migrate_one("router", named, lambda: config.router_from_url(named, **settings))
