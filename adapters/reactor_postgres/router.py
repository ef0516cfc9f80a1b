"""The PostgreSQL router: a jobs table claimed with ``FOR UPDATE SKIP LOCKED``
(docs/adapters/postgres.md, "Router").

:class:`PostgresQueue` is the queue (a :class:`reactor.ports.queues.QueuePrimitive` that also
:class:`reactor.ports.queues.WaitsForMessages`), every operation **one SQL statement** on the
deployment's schema (tables from :mod:`reactor_postgres.migrations`)::

    jobs(queue, id, seq bigserial, body bytea, visible_at float8, receive_count int, receipt)
        PRIMARY KEY (queue, id); INDEX jobs_due (queue, visible_at, seq)
    dead_letters(id bigserial, queue, message_id, body bytea, reason, at)
        INDEX dead_letters_queue (queue, id)

* ``claim``: ``WITH pick AS MATERIALIZED (SELECT ... WHERE visible_at <= now ORDER BY
  visible_at, seq LIMIT n FOR UPDATE SKIP LOCKED) UPDATE jobs SET visible_at = <lease end>,
  receive_count = receive_count + 1, receipt = gen_random_uuid() FROM pick RETURNING ...``:
  concurrent claimers skip each other's rows, so a message goes to one claimer, the pick runs
  once (never more than ``n`` rows), and each delivery gets a fresh receipt;
* ``delete``/``change_visibility``/``release`` check the receipt in their ``WHERE``, so a
  stale receipt changes nothing (``False``); ``dead_letter`` moves the row with a
  ``DELETE ... RETURNING`` feeding an ``INSERT`` in one statement;
* ``put`` and ``release`` send ``pg_notify`` on the queue's channel in the same statement
  (delivered at commit). An idle ``receive`` blocks in :meth:`PostgresQueue.wait_for_messages`
  on a listener thread's notifications instead of polling, bounded by the earliest
  ``visible_at`` in the queue (delayed jobs and lapsing leases) and by ``poll_ceiling``.

:class:`PostgresRouter` is :class:`reactor.generic.router.GenericRouter` over it (job envelopes,
delays, the stale-receipt rule, poison messages dead-lettered with their raw bodies, retries
that keep the delivery count, dead-letter administration), with the server's calibrated clock,
plus ``queue_stats`` (:class:`reactor.ports.inspection.QueueInspector`) and ``ping``.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any, LiteralString

import psycopg
from psycopg import sql

from reactor.errors import RouterError
from reactor.generic.router import GenericRouter
from reactor.ports.clock import CalibratedClock, Clock, wall_reader
from reactor.ports.driver_errors import close_quietly, translate_errors
from reactor.ports.inspection import QueueStats
from reactor.ports.queues import ClaimedMessage
from reactor.ports.router import DeadLetter
from reactor_postgres._client import DRIVER_ERRORS, PostgresClient
from reactor_postgres.signals import channel_name

__all__ = ["PostgresQueue", "PostgresRouter"]

logger = logging.getLogger(__name__)

#: Real seconds the listener thread blocks per read before it checks for close.
_LISTEN_SLICE = 0.2


class _Listener:
    """A thread that ``LISTEN``\\ s on one channel with a dedicated connection and counts the
    notifications it receives (a generation number waiters compare against).

    Args:
        conninfo: the libpq URI.
        channel: the PostgreSQL channel name.
    """

    def __init__(self, conninfo: str, channel: str) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self.cond = threading.Condition()
        self.generation = 0
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reactor-pg-listen", daemon=True)

    def start(self, timeout: float) -> None:
        """Start the thread and wait up to ``timeout`` seconds for its ``LISTEN``."""
        self._thread.start()
        self._ready.wait(timeout)

    def _bump(self) -> None:
        with self.cond:
            self.generation += 1
            self.cond.notify_all()

    def _run(self) -> None:
        while not self._stop.is_set():
            conn: psycopg.Connection[Any] | None = None
            try:
                conn = psycopg.connect(self._conninfo, autocommit=True)
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                self._ready.set()
                self._bump()  # anything sent while no one listened: waiters re-claim
                while not self._stop.is_set():
                    for _ in conn.notifies(timeout=_LISTEN_SLICE):
                        self._bump()
            except psycopg.Error as exc:
                self._ready.set()
                logger.warning("PostgreSQL queue listener on %s failed: %s", self._channel, exc)
                self._bump()
                self._stop.wait(1.0)
            finally:
                if conn is not None:
                    close_quietly(conn.close)

    def stop(self) -> None:
        """Stop the thread (within one read slice) and wake every waiter."""
        self._stop.set()
        self._bump()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(_LISTEN_SLICE * 5)


class PostgresQueue:
    """A :class:`reactor.ports.queues.QueuePrimitive` on one PostgreSQL queue (module
    docstring).

    Args:
        client: the pooled client (closed by :meth:`close` when ``owns_client``).
        queue: the queue name stored in every row (the URL's ``<prefix>:<queue>``).
        poll_ceiling: the longest real seconds an idle wait lasts without a notification.
        owns_client: close ``client`` in :meth:`close`.
    """

    def __init__(
        self,
        client: PostgresClient,
        queue: str,
        *,
        poll_ceiling: float = 1.0,
        owns_client: bool = True,
    ) -> None:
        self.client = client
        self.queue = queue
        self.channel = channel_name(client.schema, f"queue\x00{queue}")
        self._poll_ceiling = poll_ceiling
        self._owns_client = owns_client
        self._local = threading.local()
        self._listener: _Listener | None = None
        self._listener_lock = threading.Lock()
        self._closed = False
        self._clock: Callable[[], float] | None = None
        schema = sql.Identifier(client.schema)
        self._sql: dict[str, sql.Composed] = {
            name: sql.SQL(text).format(s=schema) for name, text in _STATEMENTS.items()
        }

    @property
    def poll_ceiling(self) -> float:
        """The longest real seconds an idle wait lasts without a notification."""
        return self._poll_ceiling

    def bind_clock(self, clock: Callable[[], float]) -> None:
        """Judge :meth:`stats` and idle waits by ``clock`` (epoch seconds), the clock the
        router computes ``visible_at`` with (default: the server's ``clock_timestamp()``)."""
        self._clock = clock

    def _now(self) -> float | None:
        """The bound clock's reading, ``None`` without one (the statement reads the server)."""
        return None if self._clock is None else self._clock()

    def _run(self, name: str, params: tuple[Any, ...], *, fetch: bool) -> Any:
        """Run one named statement on a pooled connection; rows or the changed-row count."""
        if self._closed:
            raise RouterError("the PostgreSQL queue is closed")
        with translate_errors(DRIVER_ERRORS, what=f"PostgreSQL queue {name}", into=RouterError):
            return self.client.execute(self._sql[name], params, fetch=fetch,
                                       idempotent=name in _READS)

    # -- QueuePrimitive ----------------------------------------------------------------------

    def put(self, message_id: str, body: str | bytes, visible_at: float) -> bool:
        """Insert-if-absent and notify the queue's listeners (one statement).

        Raises:
            TypeError: ``body`` is neither text nor bytes.
            RouterError: PostgreSQL failed.
        """
        data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
        rows = self._run("put", (self.queue, message_id, data, visible_at, self.channel),
                         fetch=True)
        return bool(rows)

    def put_many(self, message_ids: Sequence[str], bodies: Sequence[str | bytes],
                 visible_at: float) -> None:
        """Insert several messages (insert-if-absent each, in order) and notify the queue's
        listeners once, in one statement (:class:`reactor.ports.queues.PutsMany`).

        Raises:
            RouterError: PostgreSQL failed.
        """
        data = [b.encode("utf-8", "surrogatepass") if isinstance(b, str) else bytes(b)
                for b in bodies]
        self._run("put_many", (self.queue, visible_at, list(message_ids), data,
                               self.channel), fetch=True)

    def claim(self, limit: int, now: float, visible_at: float) -> list[ClaimedMessage]:
        """Lease up to ``limit`` due messages, earliest first, skipping rows other claimers
        hold (one ``UPDATE ... FOR UPDATE SKIP LOCKED`` statement).

        Raises:
            RouterError: PostgreSQL failed.
        """
        if limit <= 0:
            return []
        listener = self._ensure_listener()
        with listener.cond:
            self._local.seen = listener.generation
        rows = self._run("claim", (self.queue, now, limit, visible_at), fetch=True)
        rows.sort(key=lambda row: (row[4], row[5]))
        return [
            ClaimedMessage(message_id, bytes(body), int(count), receipt)
            for message_id, body, count, receipt, _due, _seq in rows
        ]

    def delete(self, message_id: str, receipt: str) -> bool:
        """Remove a message if ``receipt`` is current.

        Raises:
            RouterError: PostgreSQL failed.
        """
        return bool(self._run("delete", (self.queue, message_id, receipt), fetch=False) == 1)

    def change_visibility(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Move the lease end if ``receipt`` is current (it stays current).

        Raises:
            RouterError: PostgreSQL failed.
        """
        changed = self._run("extend", (visible_at, self.queue, message_id, receipt), fetch=False)
        return bool(changed == 1)

    def release(self, message_id: str, receipt: str, visible_at: float) -> bool:
        """Give a message back at ``visible_at`` if ``receipt`` is current (receipt revoked,
        body and count kept) and notify the queue's listeners.

        Raises:
            RouterError: PostgreSQL failed.
        """
        rows = self._run(
            "release", (visible_at, self.queue, message_id, receipt, self.channel), fetch=True
        )
        return bool(rows)

    def dead_letter(self, message_id: str, receipt: str, reason: str, at: float) -> bool:
        """Move a message to the dead letters if ``receipt`` is current (one statement).

        Raises:
            RouterError: PostgreSQL failed.
        """
        changed = self._run(
            "dead_letter", (self.queue, message_id, receipt, reason, at), fetch=False
        )
        return bool(changed == 1)

    def dead_letters(self, after: str | None, limit: int) -> list[DeadLetter]:
        """Letters oldest first, after the letter id ``after``.

        Raises:
            ValueError: ``after`` is not a letter id (a decimal number).
            RouterError: PostgreSQL failed.
        """
        if limit <= 0:
            return []
        start = 0
        if after is not None:
            if not (after.isascii() and after.isdigit() and len(after) <= 18):
                raise ValueError(f"bad dead-letter cursor {after!r}")
            start = int(after)
        rows = self._run("dead_letters", (self.queue, start, limit), fetch=True)
        return [
            DeadLetter.from_raw(bytes(body), reason, float(at), str(letter_id))
            for letter_id, body, reason, at in rows
        ]

    def get_dead_letter(self, letter_id: str) -> DeadLetter | None:
        """One letter; ``None`` when absent or ``letter_id`` is malformed.

        Raises:
            RouterError: PostgreSQL failed.
        """
        if not (letter_id.isascii() and letter_id.isdigit() and len(letter_id) <= 18):
            return None
        rows = self._run("get_dead_letter", (self.queue, int(letter_id)), fetch=True)
        if not rows or str(rows[0][0]) != letter_id:
            return None
        number, body, reason, at = rows[0]
        return DeadLetter.from_raw(bytes(body), reason, float(at), str(number))

    def remove_dead_letter(self, letter_id: str) -> bool:
        """Remove one letter; of concurrent removals exactly one gets ``True``.

        Raises:
            RouterError: PostgreSQL failed.
        """
        if not (letter_id.isascii() and letter_id.isdigit() and len(letter_id) <= 18):
            return False
        changed = self._run("remove_dead_letter", (self.queue, int(letter_id)), fetch=False)
        return bool(changed == 1)

    # -- WaitsForMessages --------------------------------------------------------------------

    def _ensure_listener(self) -> _Listener:
        """The queue's listener, started (its ``LISTEN`` done) on first use."""
        listener = self._listener
        if listener is not None:
            return listener
        with self._listener_lock:
            if self._listener is None:
                if self._closed:
                    raise RouterError("the PostgreSQL queue is closed")
                started = _Listener(self.client.conninfo, self.channel)
                started.start(timeout=10.0)
                self._listener = started
            return self._listener

    def wait_for_messages(self, timeout: float) -> None:
        """Block up to ``timeout`` real seconds for a notification on the queue's channel
        sent since this thread's last :meth:`claim` (a ``put`` or ``release``), and no longer
        than until the earliest ``visible_at`` in the queue (a delayed job or a lapsing
        lease becomes due without a notification) or ``poll_ceiling``.

        Raises:
            RouterError: PostgreSQL failed.
        """
        if self._closed or timeout <= 0:
            return
        listener = self._ensure_listener()
        seen = getattr(self._local, "seen", None)
        with listener.cond:
            if seen is None or listener.generation != seen:
                return
        rows = self._run("next_due", (self._now(), self.queue), fetch=True)
        until_due = rows[0][0] if rows else None
        bound = min(timeout, self._poll_ceiling)
        if until_due is not None:
            bound = min(bound, max(float(until_due), 0.002))
        with listener.cond:
            listener.cond.wait_for(lambda: listener.generation != seen or self._closed, bound)

    # -- inspection and lifecycle ------------------------------------------------------------

    def stats(self) -> QueueStats:
        """Ready, delayed and in-flight jobs and dead letters (one statement, judged by the
        server clock).

        Raises:
            RouterError: PostgreSQL failed.
        """
        rows = self._run("stats", (self.queue, self._now(), self.queue), fetch=True)
        ready, delayed, in_flight, dead = rows[0]
        return QueueStats(ready=int(ready), delayed=int(delayed), in_flight=int(in_flight),
                          dead_letters=int(dead))

    def ping(self) -> None:
        """One round trip (``SELECT 1``).

        Raises:
            RouterError: PostgreSQL failed.
        """
        with translate_errors(DRIVER_ERRORS, what="PostgreSQL ping", into=RouterError), \
                self.client.connection() as conn:
            conn.execute("SELECT 1")

    def purge(self) -> int:
        """Delete every job and dead letter of this queue; returns how many (the contract
        probe's cleanup).

        Raises:
            RouterError: PostgreSQL failed.
        """
        rows = self._run("purge", (self.queue, self.queue), fetch=True)
        return int(rows[0][0]) + int(rows[0][1])

    def leftovers(self) -> list[str]:
        """``"jobs/<id>"`` and ``"dead_letters/<id>"`` of every row of this queue, sorted.

        Raises:
            RouterError: PostgreSQL failed.
        """
        rows = self._run("leftovers", (self.queue, self.queue), fetch=True)
        return sorted(f"{table}/{ident}" for table, ident in rows)

    def close(self) -> None:
        """Stop the listener and close the client when owned; idempotent, never raises."""
        if self._closed:
            return
        self._closed = True
        with self._listener_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()
        if self._owns_client:
            self.client.close()


class PostgresRouter(GenericRouter):
    """A :class:`reactor.ports.Router` (and ``DeadLetterAdmin``, ``QueueInspector``,
    ``Pingable``) on a PostgreSQL jobs table.

    Args:
        queue: the queue primitive.
        visibility_timeout: seconds a delivery stays invisible before it comes back.
        clock: epoch seconds for delays and leases; ``None``: the server's calibrated clock.

    Attributes:
        primitive: the :class:`PostgresQueue`.
    """

    primitive: PostgresQueue

    def __init__(
        self,
        queue: PostgresQueue,
        *,
        visibility_timeout: float = 30.0,
        clock: Callable[[], float] | Clock | None = None,
    ) -> None:
        if clock is None:
            client = queue.client

            def read() -> float:
                with translate_errors(DRIVER_ERRORS, what="PostgreSQL clock", into=RouterError):
                    return client.server_time()

            clock = CalibratedClock(read, resolution=1e-6).now
        queue.bind_clock(wall_reader(clock))
        # waits block on LISTEN/NOTIFY (PostgresQueue.wait_for_messages), which bounds them
        # by the next due job; the poll interval is only the ceiling between two claims
        super().__init__(
            queue,
            visibility_timeout=visibility_timeout,
            clock=clock,
            poll_interval=queue.poll_ceiling,
        )

    def migrate(self) -> list[int]:
        """Bring the schema up to date (``reactor migrate``; docs/adapters/postgres.md,
        "Schema and migration").

        Returns:
            The migration versions applied, ascending (``[]``: already up to date).

        Raises:
            RouterError: PostgreSQL failed or refused a statement (nothing applied).
        """
        with translate_errors(DRIVER_ERRORS, what="PostgreSQL migration", into=RouterError):
            return self.primitive.client.migrate_now()

    def enqueue_raw(self, body: str | bytes) -> None:
        """Queue ``body`` as a message, due now, without validating it (probes and tests:
        a foreign producer's bytes, stored byte for byte).

        Raises:
            RouterError: PostgreSQL failed.
        """
        self.primitive.put(f"raw-{uuid.uuid4().hex}", body, self._clock())

    def queue_stats(self) -> QueueStats:
        """Ready, delayed and in-flight jobs and dead letters of this queue.

        Raises:
            RouterError: PostgreSQL failed.
        """
        return self.primitive.stats()

    def ping(self) -> None:
        """One round trip.

        Raises:
            RouterError: PostgreSQL failed.
        """
        self.primitive.ping()


#: The statements that change nothing (run again once when their connection had died).
_READS = frozenset({"dead_letters", "get_dead_letter", "next_due", "stats", "leftovers"})

_STATEMENTS: dict[str, LiteralString] = {
    "put": "WITH ins AS (INSERT INTO {s}.jobs (queue, id, body, visible_at)"
    " VALUES (%s, %s, %s, %s) ON CONFLICT (queue, id) DO NOTHING RETURNING 1)"
    " SELECT pg_notify(%s, '') FROM ins",
    # MATERIALIZED: the pick runs once. As a plain sub-select the planner may put it on the
    # inner side of a nested loop and re-run it per outer row; each re-run skips the rows
    # this statement already updated and locks the next ones, so one claim took more than
    # its LIMIT (a contract run saw 3 deliveries for max_jobs=2)
    "put_many": "WITH ins AS (INSERT INTO {s}.jobs (queue, id, body, visible_at)"
    " SELECT %s, m.id, m.body, %s FROM unnest(%s::text[], %s::bytea[])"
    " WITH ORDINALITY AS m(id, body, n) ORDER BY m.n"
    " ON CONFLICT (queue, id) DO NOTHING RETURNING 1)"
    " SELECT pg_notify(%s, '') WHERE EXISTS (SELECT 1 FROM ins)",
    "claim": "WITH pick AS MATERIALIZED (SELECT queue, id, visible_at, seq FROM {s}.jobs"
    " WHERE queue = %s AND visible_at <= %s ORDER BY visible_at, seq LIMIT %s"
    " FOR UPDATE SKIP LOCKED)"
    " UPDATE {s}.jobs AS j SET visible_at = %s, receive_count = j.receive_count + 1,"
    " receipt = gen_random_uuid()::text FROM pick"
    " WHERE j.queue = pick.queue AND j.id = pick.id"
    " RETURNING j.id, j.body, j.receive_count, j.receipt, pick.visible_at, pick.seq",
    "delete": "DELETE FROM {s}.jobs WHERE queue = %s AND id = %s AND receipt = %s",
    "extend": "UPDATE {s}.jobs SET visible_at = %s WHERE queue = %s AND id = %s"
    " AND receipt = %s",
    "release": "WITH upd AS (UPDATE {s}.jobs SET visible_at = %s, receipt = NULL"
    " WHERE queue = %s AND id = %s AND receipt = %s RETURNING 1)"
    " SELECT pg_notify(%s, '') FROM upd",
    "dead_letter": "WITH moved AS (DELETE FROM {s}.jobs WHERE queue = %s AND id = %s"
    " AND receipt = %s RETURNING queue, id, body)"
    " INSERT INTO {s}.dead_letters (queue, message_id, body, reason, at)"
    " SELECT queue, id, body, %s, %s FROM moved",
    "dead_letters": "SELECT id, body, reason, at FROM {s}.dead_letters"
    " WHERE queue = %s AND id > %s ORDER BY id LIMIT %s",
    "get_dead_letter": "SELECT id, body, reason, at FROM {s}.dead_letters"
    " WHERE queue = %s AND id = %s",
    "remove_dead_letter": "DELETE FROM {s}.dead_letters WHERE queue = %s AND id = %s",
    "next_due": "SELECT min(visible_at)"
    " - coalesce(%s::float8, extract(epoch FROM clock_timestamp())::float8)"
    " FROM {s}.jobs WHERE queue = %s",
    "stats": "SELECT count(*) FILTER (WHERE j.visible_at <= n.t),"
    " count(*) FILTER (WHERE j.visible_at > n.t AND j.receipt IS NULL),"
    " count(*) FILTER (WHERE j.visible_at > n.t AND j.receipt IS NOT NULL),"
    " (SELECT count(*) FROM {s}.dead_letters WHERE queue = %s)"
    " FROM {s}.jobs AS j,"
    " (SELECT coalesce(%s::float8, extract(epoch FROM clock_timestamp())::float8) AS t) AS n"
    " WHERE j.queue = %s",
    "purge": "WITH a AS (DELETE FROM {s}.jobs WHERE queue = %s RETURNING 1),"
    " b AS (DELETE FROM {s}.dead_letters WHERE queue = %s RETURNING 1)"
    " SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b)",
    "leftovers": "SELECT 'jobs', id FROM {s}.jobs WHERE queue = %s"
    " UNION ALL SELECT 'dead_letters', id::text FROM {s}.dead_letters WHERE queue = %s",
}
