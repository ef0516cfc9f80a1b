"""Best-effort completion signals on PostgreSQL ``LISTEN``/``NOTIFY`` (docs/protocol.md#signals).

``publish`` is ``SELECT pg_notify(channel, message)`` on a pooled connection. Each
:class:`PostgresSubscription` holds a dedicated autocommit connection that ran ``LISTEN``
before :meth:`PostgresSignalStore.subscribe` returns, so a message published afterwards is
delivered. PostgreSQL channel names are identifiers of at most 63 bytes, so a reactor channel
(``run:<id>:done`` under the store's schema and prefix) is hashed to ``rx_<40 hex digits>``
(:func:`channel_name`). Payloads longer than 7,900 bytes are cut (``NOTIFY``'s limit is
8,000): signals only shorten waits, waiters always re-check the durable record.
"""

from __future__ import annotations

import hashlib
import weakref
from collections import deque
from typing import Any

import psycopg
from psycopg import sql

from reactor.ports.driver_errors import close_quietly, translate_errors
from reactor_postgres._client import DRIVER_ERRORS, PostgresClient

__all__ = ["PostgresSignalStore", "PostgresSubscription", "channel_name"]

_MAX_PAYLOAD_BYTES = 7900


def channel_name(schema: str, namespace: str) -> str:
    """The PostgreSQL channel of one reactor channel: ``rx_`` + 40 hex digits of SHA-256.

    Args:
        schema: the deployment's schema.
        namespace: the prefixed reactor channel (``"<prefix>:<channel>"``) or queue name.
    """
    digest = hashlib.sha256(f"{schema}\x00{namespace}".encode()).hexdigest()[:40]
    return f"rx_{digest}"


class PostgresSubscription:
    """A live subscription to one channel (a :class:`reactor.ports.Subscription`).

    Args:
        connection: a dedicated autocommit connection that already ran ``LISTEN``.
    """

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self._conn = connection
        self._pending: deque[str] = deque()
        self._closed = False

    def get(self, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for a message; ``None`` on timeout or when closed.

        Raises:
            StorageError: the connection failed.
        """
        if self._closed:
            return None
        if not self._pending:
            # ``stop_after=1`` may still yield several: every one that came in the same
            # packet; keep them all (breaking out of the generator would drop the rest)
            with translate_errors(DRIVER_ERRORS, what="PostgreSQL signal get"):
                for notify in self._conn.notifies(timeout=max(timeout, 0.0), stop_after=1):
                    self._pending.append(notify.payload)
        return self._pending.popleft() if self._pending else None

    def close(self) -> None:
        """Close the dedicated connection (which ends the ``LISTEN``); idempotent."""
        if self._closed:
            return
        self._closed = True
        close_quietly(self._conn.close)


class PostgresSignalStore:
    """:class:`reactor.ports.SignalStore` on ``LISTEN``/``NOTIFY``.

    Args:
        client: the pooled client (publishes go through it; subscriptions open their own
            connections on its ``conninfo``).
        prefix: the storage's namespace (``""`` = none).
    """

    def __init__(self, client: PostgresClient, prefix: str = "") -> None:
        self._client = client
        self._prefix = f"{prefix}:" if prefix else ""
        self._open: weakref.WeakSet[PostgresSubscription] = weakref.WeakSet()

    def _channel(self, channel: str) -> str:
        return channel_name(self._client.schema, self._prefix + channel)

    def publish(self, channel: str, message: str) -> None:
        """Notify ``channel``'s listeners (one statement); never raises for no listener.

        Raises:
            StorageError: PostgreSQL failed.
        """
        payload = message.encode()[:_MAX_PAYLOAD_BYTES].decode(errors="ignore")
        with translate_errors(DRIVER_ERRORS, what="PostgreSQL signal publish"), \
                self._client.connection() as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (self._channel(channel), payload))

    def subscribe(self, channel: str) -> PostgresSubscription:
        """Start listening on ``channel``: a dedicated connection runs ``LISTEN`` before this
        returns.

        Raises:
            StorageError: PostgreSQL failed.
        """
        with translate_errors(DRIVER_ERRORS, what="PostgreSQL signal subscribe"):
            conn = psycopg.connect(self._client.conninfo, autocommit=True)
            try:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel(channel))))
            except BaseException:
                close_quietly(conn.close)
                raise
        subscription = PostgresSubscription(conn)
        self._open.add(subscription)
        return subscription

    def close_all(self) -> None:
        """Close every subscription still open (called by ``PostgresStorage.close``)."""
        for subscription in list(self._open):
            subscription.close()
