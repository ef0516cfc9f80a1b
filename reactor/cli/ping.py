"""``reactor ping``: check that the storage (and the router) answer, within a timeout
(docs/workers.md, "Running workers").

Each backend is built from its URL and sent one cheap request
(:class:`reactor.ports.inspection.Pingable` where the adapter has it, else one page of runs
for a storage and one dead letter for a router), in a helper thread the command waits on for at
most ``--timeout`` seconds, so a backend that never answers fails as fast as one that refuses
the connection. Exit 0 when every backend answered, 1 with one stderr line naming the backend
and the error when one did not, 2 for a bad URL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer

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
from reactor.errors import ConfigurationError
from reactor.ports.inspection import Pingable
from reactor.ports.router import Router
from reactor.ports.storage import Storage

__all__ = ["DEFAULT_PING_TIMEOUT", "ping", "ping_backend"]

#: Seconds ``reactor ping`` waits for each backend by default.
DEFAULT_PING_TIMEOUT = 5.0


def _ping_storage(storage: Storage) -> None:
    if isinstance(storage, Pingable):
        storage.ping()
    else:
        storage.contexts.page(limit=1)


def _ping_router(router: Router) -> None:
    if isinstance(router, Pingable):
        router.ping()
    else:
        router.dead_letters(limit=1)


def ping_backend(
    build: Callable[[], Any], check: Callable[[Any], None], timeout: float
) -> tuple[float | None, BaseException | None]:
    """Build a backend and send it one request in a daemon thread, waiting ``timeout`` seconds.

    The adapter is closed after the request (best effort). A thread still blocked at the
    deadline is abandoned (daemon: it never keeps the process alive).

    Args:
        build: makes the adapter (e.g. ``lambda: config.storage_from_url(url)``).
        check: sends the request (raises when the backend did not answer).
        timeout: seconds to wait for build and request together.

    Returns:
        ``(seconds, None)`` when it answered; ``(None, error)`` when building or the request
        raised; ``(None, None)`` when nothing came back within ``timeout``.
    """
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        started = time.monotonic()
        try:
            adapter = build()
            try:
                check(adapter)
            finally:
                try:
                    adapter.close()
                except Exception:  # closing a probe connection is best effort
                    pass
            outcome["seconds"] = time.monotonic() - started
        except BaseException as exc:  # reported by the caller, never raised in the thread
            outcome["error"] = exc

    thread = threading.Thread(target=attempt, name="reactor-ping", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return None, None
    return outcome.get("seconds"), outcome.get("error")


@app.command()
def ping(
    storage: StorageOpt = None,
    router: RouterOpt = None,
    timeout: Annotated[
        float,
        typer.Option(help="Seconds to wait for each backend before failing.", min=0.01),
    ] = DEFAULT_PING_TIMEOUT,
    setting: SettingOpt = None,
) -> None:
    """Check that the storage (and the router, when one is named) answer; exit 1 if not.

    Each backend gets one cheap request and at most --timeout seconds; the router is checked
    when --router or REACTOR_ROUTER_URL names one. Backends are built with the engine settings
    (-s/--setting, then REACTOR_<SETTING>). Exit 0 all answered, 1 one did not (one stderr
    line naming it), 2 bad URL or setting. See docs/workers.md, "Running workers".
    """
    settings = _adapter_settings(setting)  # as every command: a bad one is exit 2
    checks: list[tuple[str, str, Callable[[], Any], Callable[[Any], None]]] = []
    storage_url = config.resolve_storage_url(storage)
    checks.append((
        "storage", storage_url, lambda: config.storage_from_url(storage_url, **settings),
        _ping_storage,
    ))
    router_url = router if router is not None else None
    if router_url is None and config.resolve_router_url() != config.DEFAULT_ROUTER_URL:
        router_url = config.resolve_router_url()
    if router_url is not None:
        named_router = router_url
        checks.append((
            "router", named_router, lambda: config.router_from_url(named_router, **settings),
            _ping_router,
        ))
    for role, url, build, check in checks:
        shown = display_url(url)
        seconds, error = ping_backend(build, check, timeout)
        if isinstance(error, ConfigurationError):
            fail(f"bad {role} URL {shown}: {error}", EXIT_USAGE)
        if error is not None:
            reason = " ".join(str(error).split())  # one line, whatever the driver's message
            fail(f"{role} {shown} unreachable: {type(error).__name__}: {reason}", EXIT_FAILURE)
        if seconds is None:
            fail(f"{role} {shown} unreachable: no answer within {timeout:g} s", EXIT_FAILURE)
        console.print(f"{role} {shown}: ok ({seconds * 1000:.1f} ms)", markup=False)
