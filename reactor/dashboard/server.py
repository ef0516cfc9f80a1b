"""Serving the dashboard with uvicorn (docs/dashboard.md, "Running it").

* :func:`serve` runs it in the foreground (``reactor dashboard`` calls it) until interrupted.
* :func:`start_dashboard` runs it on a background thread of *this* process and returns a
  :class:`DashboardServer` — the way to look at the embedded default (``memory://`` storage,
  ``local://`` router), whose runs live only in this process's memory (development, demos,
  tests). ``port=0`` picks a free port; :attr:`DashboardServer.url` tells which.

Both bind ``127.0.0.1`` unless told otherwise.
"""

from __future__ import annotations

import asyncio
import threading
from socket import socket
from typing import Any

import uvicorn

from reactor.config import Runtime
from reactor.dashboard.app import create_app

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DashboardServer", "serve", "start_dashboard"]

#: Where the dashboard listens by default: this host only.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8800


def serve(
    runtime: Runtime | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    read_only: bool | None = None,
    log_level: str = "warning",
) -> None:
    """Serve the dashboard in the foreground until interrupted (Ctrl-C, SIGTERM).

    Args:
        runtime: the runtime to show; ``None``: :func:`reactor.config.current`.
        host: the address to bind (default 127.0.0.1: this host only).
        port: the TCP port.
        token: the action token (``None``: read-only).
        read_only: see :func:`reactor.dashboard.create_app`.
        log_level: uvicorn's log level.

    Raises:
        ConfigurationError: a bad token / read-only combination.
    """
    app = create_app(runtime, token=token, read_only=read_only)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)


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

    def __init__(self, app: Any, host: str, port: int, log_level: str = "warning") -> None:
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                                access_log=False, lifespan="off")
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

    Returns:
        The running :class:`DashboardServer` (``.url``, ``.stop()``).

    Raises:
        ConfigurationError: a bad token / read-only combination.
        RuntimeError: the server did not start.
    """
    app = create_app(runtime, token=token, read_only=read_only)
    return DashboardServer(app, host, port, log_level).start()
