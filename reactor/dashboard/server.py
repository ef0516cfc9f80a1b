"""Serving the dashboard with uvicorn (docs/dashboard.md, "Running it").

* :func:`serve` runs it in the foreground (``reactor dashboard`` calls it) until interrupted.
* :func:`start_dashboard` runs it on a background thread of *this* process and returns a
  :class:`DashboardServer` — the way to look at the embedded default (``memory://`` storage,
  ``local://`` router), whose runs live only in this process's memory (development, demos,
  tests). ``port=0`` picks a free port; :attr:`DashboardServer.url` tells which.

Both bind ``127.0.0.1`` unless told otherwise, answer only to the bound address's names (plus
``allowed_hosts``), and drop connections that hold the server without asking anything
(:class:`ConnectionLimits`: a deadline for a request's headers, an idle keep-alive timeout, a
cap on connections and on a request head's size; docs/dashboard.md, "Security").
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from socket import socket
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from reactor.config import Runtime
from reactor.dashboard.app import create_app
from reactor.dashboard.security import SessionPolicy, allowed_hosts
from reactor.errors import ConfigurationError

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ConnectionLimits",
    "DashboardServer",
    "serve",
    "start_dashboard",
]

#: Where the dashboard listens by default: this host only.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8800


@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may hold of the server (docs/dashboard.md, "Security").

    Attributes:
        header_timeout: seconds a connection has to send a whole request head, from when it
            opens or its previous answer was sent; then it is closed (a half-open or
            trickling client). Default 10.
        keep_alive_timeout: seconds an idle kept-alive connection stays open. Default 5.
        max_connections: connections and requests at once; beyond it a request is answered
            503. Default 64.
        max_header_bytes: the largest request head, in bytes (larger: 400). Default 16 KiB.

    Raises:
        ConfigurationError: a limit that is not positive (names the field).
    """

    header_timeout: float = 10.0
    keep_alive_timeout: int = 5
    max_connections: int = 64
    max_header_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        for name in ("header_timeout", "keep_alive_timeout", "max_connections",
                     "max_header_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and value > 0
            ):
                raise ConfigurationError(
                    f"dashboard connection limit {name} must be positive, got {value!r}"
                )

    def protocol(self) -> type[asyncio.Protocol]:
        """uvicorn's h11 protocol with the header deadline of these limits."""
        return type("DashboardH11Protocol", (_HeaderDeadline,),
                    {"header_timeout": float(self.header_timeout)})

    def config(self, app: Any, host: str, port: int, log_level: str,
               **options: Any) -> uvicorn.Config:
        """A uvicorn configuration for ``app`` under these limits."""
        return uvicorn.Config(
            app, host=host, port=port, log_level=log_level, access_log=False,
            http=self.protocol(), timeout_keep_alive=int(self.keep_alive_timeout),
            limit_concurrency=self.max_connections,
            h11_max_incomplete_event_size=self.max_header_bytes, **options,
        )


class _HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol, plus a deadline for each request head: uvicorn itself waits
    forever for a connection that opened and sends nothing, or sends its head a byte at a
    time (its keep-alive timer restarts with every byte)."""

    header_timeout = 10.0
    _deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a whole request head arrived
            self._disarm()

    def on_response_complete(self) -> None:
        self._arm()
        super().on_response_complete()


def serve(
    runtime: Runtime | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    read_only: bool | None = None,
    log_level: str = "warning",
    hosts: Sequence[str] = (),
    sessions: SessionPolicy | None = None,
    limits: ConnectionLimits | None = None,
) -> None:
    """Serve the dashboard in the foreground until interrupted (Ctrl-C, SIGTERM).

    Args:
        runtime: the runtime to show; ``None``: :func:`reactor.config.current`.
        host: the address to bind (default 127.0.0.1: this host only).
        port: the TCP port.
        token: the action token (``None``: read-only).
        read_only: see :func:`reactor.dashboard.create_app`.
        log_level: uvicorn's log level.
        hosts: more ``Host`` names to answer to than the bound address's
            (:func:`reactor.dashboard.security.allowed_hosts`; ``--allowed-host``).
        sessions: browser session lifetimes (default
            :class:`~reactor.dashboard.security.SessionPolicy`).
        limits: connection limits (default :class:`ConnectionLimits`).

    Raises:
        ConfigurationError: a bad token / read-only combination, host name or limit.
    """
    app = create_app(runtime, token=token, read_only=read_only,
                     allowed_hosts=allowed_hosts(host, tuple(hosts)), sessions=sessions)
    config = (limits or ConnectionLimits()).config(app, host, port, log_level)
    uvicorn.Server(config).run()


class _Server(uvicorn.Server):
    """A uvicorn server that says when it listens (or failed to start)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()

    def install_signal_handlers(self) -> None:
        """A background server leaves the process's signals alone."""


class DashboardServer:
    """A dashboard served on a background thread of this process (:func:`start_dashboard`).

    Use it as a context manager, or call :meth:`stop`.
    """

    def __init__(self, app: Any, host: str, port: int, log_level: str = "warning",
                 limits: ConnectionLimits | None = None) -> None:
        config = (limits or ConnectionLimits()).config(app, host, port, log_level,
                                                       lifespan="off")
        self._server = _Server(config)
        self._thread = threading.Thread(target=self._run, name="reactor-dashboard",
                                        daemon=True)
        self._error: BaseException | None = None
        self.host = host
        self.port = port

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve())
        except BaseException as exc:  # reported by start(); the thread just ends
            self._error = exc
        finally:
            self._server.ready.set()

    def start(self, timeout: float = 30.0) -> DashboardServer:
        """Start serving and wait until the socket listens.

        Raises:
            RuntimeError: the server did not start (port taken, bad host) within ``timeout``.
        """
        self._thread.start()
        if not self._server.ready.wait(timeout) or not self._server.started:
            self.stop()
            raise RuntimeError(f"the dashboard did not start on {self.host}:{self.port}"
                               + (f": {self._error}" if self._error else ""))
        servers = getattr(self._server, "servers", None) or []
        for server in servers:
            for sock in getattr(server, "sockets", None) or []:
                self.port = int(sock.getsockname()[1])
                break
        return self

    @property
    def url(self) -> str:
        """The dashboard's base URL, e.g. ``http://127.0.0.1:8800``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and wait for the thread to end (at most ``timeout`` seconds)."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)

    def __enter__(self) -> DashboardServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_dashboard(
    runtime: Runtime | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    token: str | None = None,
    read_only: bool | None = None,
    log_level: str = "warning",
    hosts: Sequence[str] = (),
    sessions: SessionPolicy | None = None,
    limits: ConnectionLimits | None = None,
) -> DashboardServer:
    """Serve the dashboard on a background thread of this process (see the module docstring).

    Args:
        runtime: the runtime to show; ``None``: :func:`reactor.config.current` at each
            request (so the embedded default this process runs reactors on).
        host: the address to bind (default 127.0.0.1).
        port: the TCP port; 0 (default) picks a free one.
        token: the action token (``None``: read-only).
        read_only: see :func:`reactor.dashboard.create_app`.
        log_level: uvicorn's log level.
        hosts: more ``Host`` names to answer to (see :func:`serve`).
        sessions: browser session lifetimes (see :func:`serve`).
        limits: connection limits (default :class:`ConnectionLimits`).

    Returns:
        The running :class:`DashboardServer` (``.url``, ``.stop()``).

    Raises:
        ConfigurationError: a bad token / read-only combination.
        RuntimeError: the server did not start.
    """
    app = create_app(runtime, token=token, read_only=read_only,
                     allowed_hosts=allowed_hosts(host, tuple(hosts)), sessions=sessions)
    return DashboardServer(app, host, port, log_level, limits).start()
