"""Faults injected at the driver: make the Nth request of an adapter's driver client fail.

The contract suite checks how an adapter copes with a failing backend without changing a line
of the adapter (docs/contract-suite.md, "Faults injected at the driver"). A
:class:`FaultInjector` is given the adapter's driver clients, as the probe's optional
:class:`reactor_contract.probe.DriverProbe` capability names them (``(owner, attribute)``
pairs), installs itself at the driver level, counts the requests the clients send, and, once
armed, fails request number N (counted from the arming) with one of :data:`KINDS`, raising the
driver's own exception classes, exactly as a real outage would reach the adapter:

============================ =========================================================
kind                         what the adapter sees
============================ =========================================================
``transient``                the connection reset before the request reached the server
``throttled``                the server refused the request for now (rate, load)
``permission``               the server refused the request for good (no permission)
``validation``               the server rejected the request as malformed
``applied_then_timeout``     the server applied the request, then the reply timed out
============================ =========================================================

One implementation per driver, chosen by the client's type: redis-py (``Redis``,
``RedisCluster``), pymongo's ``MongoClient`` and mongomock's, a boto3/botocore client, a
:class:`sqlite3.Connection` and a :class:`psycopg_pool.ConnectionPool`. Only requests made by
the thread that armed the injector are counted (a background listener never shifts N).
"""

from __future__ import annotations

import contextlib
import importlib
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

__all__ = [
    "APPLIED_THEN_TIMEOUT",
    "KINDS",
    "PERMANENT_KINDS",
    "PERMISSION",
    "THROTTLED",
    "TRANSIENT",
    "TRANSIENT_KINDS",
    "VALIDATION",
    "FaultInjector",
    "Fired",
    "UnsupportedDriver",
    "driver_name",
]

#: The connection reset before the request reached the server (nothing was applied).
TRANSIENT = "transient"
#: The server refused the request for now: throttling, overload (nothing was applied).
THROTTLED = "throttled"
#: The server refused the request for good: the credentials lack a permission.
PERMISSION = "permission"
#: The server rejected the request as malformed (a validation error).
VALIDATION = "validation"
#: The server applied the request, then the reply was lost to a timeout.
APPLIED_THEN_TIMEOUT = "applied_then_timeout"

#: Every fault kind, in the order of docs/contract-suite.md, "Faults injected at the driver".
KINDS: tuple[str, ...] = (TRANSIENT, THROTTLED, PERMISSION, VALIDATION, APPLIED_THEN_TIMEOUT)
#: Faults a retry may overcome: the operation surfaces the typed error or completes.
TRANSIENT_KINDS: frozenset[str] = frozenset({TRANSIENT, THROTTLED, APPLIED_THEN_TIMEOUT})
#: Faults no retry overcomes: the operation must surface the typed error.
PERMANENT_KINDS: frozenset[str] = frozenset({PERMISSION, VALIDATION})

_MISSING = object()


class UnsupportedDriver(TypeError):
    """The client named by a probe is of no driver the injector knows."""


@dataclass(frozen=True)
class Fired:
    """One injected fault.

    Attributes:
        number: the failed request's number, counted from the arming (1 = the first).
        kind: one of :data:`KINDS`.
        what: the request, e.g. ``"redis EVALSHA"``, ``"dynamodb PutItem"``.
        error: the driver exception raised to the adapter.
    """

    number: int
    kind: str
    what: str
    error: BaseException


class _Plan:
    """The counter and the armed fault, shared by every driver hook of one injector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self.thread: int | None = None
        self.count = 0
        self.at: int | None = None
        self.times = 0
        self.kind = TRANSIENT
        self.fired: list[Fired] = []
        self.requests: list[str] = []
        self.installed = False

    def arm(self, at: int, kind: str, times: int) -> None:
        with self._lock:
            self.thread = threading.get_ident()
            self.count = 0
            self.at, self.kind, self.times = at, kind, times
            self.fired = []
            self.requests = []

    def disarm(self) -> None:
        with self._lock:
            self.at = None

    def decide(self, what: str) -> tuple[int, str] | None:
        """Count one request of this thread; ``(number, kind)`` when it is to fail."""
        if not self.installed or self.thread != threading.get_ident():
            return None
        with self._lock:
            self.count += 1
            self.requests.append(what)
            at = self.at
            if at is None or not at <= self.count < at + self.times:
                return None
            return self.count, self.kind

    def record(self, number: int, kind: str, what: str, error: BaseException) -> None:
        with self._lock:
            self.fired.append(Fired(number, kind, what, error))

    @contextlib.contextmanager
    def outermost(self) -> Iterator[bool]:
        """Whether this call is the outermost driver call of the thread (nested calls, such
        as pymongo's ``find_one`` calling ``find``, count once)."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            yield depth == 0
        finally:
            self._local.depth = depth


class _Driver:
    """One driver's hooks. Subclasses install themselves around ``client`` and build the
    driver's exception for each kind."""

    name = "?"

    def __init__(self, owner: object, attribute: str, client: Any, plan: _Plan) -> None:
        self.owner, self.attribute, self.client, self.plan = owner, attribute, client, plan

    def install(self) -> None:
        raise NotImplementedError

    def uninstall(self) -> None:
        raise NotImplementedError

    def error(self, kind: str, what: str) -> BaseException:
        raise NotImplementedError

    def through(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one driver request through the plan: fail it before it is sent, or after it
        was applied, or let it pass."""
        with self.plan.outermost() as outermost:
            decided = self.plan.decide(what) if outermost else None
            if decided is None:
                return call(*args, **kwargs)
            number, kind = decided
            if kind == APPLIED_THEN_TIMEOUT:
                with contextlib.suppress(Exception):  # its reply is lost either way
                    call(*args, **kwargs)
            error = self.error(kind, what)
            self.plan.record(number, kind, what, error)
            raise error


def _set_instance(obj: Any, name: str, value: Any, saved: list[tuple[Any, str, Any]]) -> None:
    saved.append((obj, name, obj.__dict__.get(name, _MISSING)))
    setattr(obj, name, value)


def _restore(saved: list[tuple[Any, str, Any]]) -> None:
    while saved:
        obj, name, previous = saved.pop()
        if previous is _MISSING:
            with contextlib.suppress(AttributeError):
                delattr(obj, name)
        else:
            setattr(obj, name, previous)


# -- redis-py ----------------------------------------------------------------------------------


class _RedisFaults(_Driver):
    """redis-py: the client's command path (``_execute_command``, or a cluster's
    ``_internal_execute_command``, below ``execute_command``: so Lua scripts bound to the
    client's ``execute_command`` before the install are caught too) and ``pipeline()``, whose
    pipelines fail or count their ``execute``. Pub/sub connections are not counted."""

    name = "redis"

    def install(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []
        client = self.client
        inner = next(
            (n for n in ("_internal_execute_command", "_execute_command")
             if callable(getattr(type(client), n, None))),
            "execute_command",
        )
        original = getattr(client, inner)

        def execute(*args: Any, **options: Any) -> Any:
            return self.through(f"redis {args[0] if args else '?'}", original, *args, **options)

        _set_instance(client, inner, execute, self._saved)
        make_pipeline = client.pipeline

        def pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = make_pipeline(*args, **kwargs)
            run = pipe.execute

            def execute_pipeline(*a: Any, **kw: Any) -> Any:
                return self.through(f"redis pipeline of {len(pipe)}", run, *a, **kw)

            pipe.execute = execute_pipeline
            return pipe

        _set_instance(client, "pipeline", pipeline, self._saved)

    def uninstall(self) -> None:
        _restore(self._saved)

    def error(self, kind: str, what: str) -> BaseException:
        import redis.exceptions as rx

        if kind == TRANSIENT:
            return rx.ConnectionError(f"Connection reset by peer (injected before {what})")
        if kind == THROTTLED:
            return rx.BusyLoadingError(
                f"LOADING Redis is loading the dataset in memory (injected at {what})"
            )
        if kind == PERMISSION:
            return rx.NoPermissionError(
                f"NOPERM User default has no permissions to run this command (injected at {what})"
            )
        if kind == VALIDATION:
            return rx.ResponseError(
                "WRONGTYPE Operation against a key holding the wrong kind of value "
                f"(injected at {what})"
            )
        return rx.TimeoutError(f"Timeout reading from socket (injected after {what} applied)")


# -- pymongo / mongomock -----------------------------------------------------------------------

_COLLECTION_METHODS = (
    "insert_one", "insert_many", "replace_one", "update_one", "update_many", "delete_one",
    "delete_many", "find", "find_one", "find_one_and_update", "find_one_and_replace",
    "find_one_and_delete", "count_documents", "estimated_document_count", "aggregate",
    "bulk_write", "distinct", "create_index", "create_indexes", "drop_index", "drop",
    "index_information", "list_indexes",
)
_DATABASE_METHODS = (
    "command", "list_collection_names", "list_collections", "create_collection",
    "drop_collection",
)

#: ``{id(client): hook}`` of the installed pymongo/mongomock injectors (the class patches
#: look their client up here).
_MONGO_HOOKS: dict[int, _MongoFaults] = {}
#: ``{(class, method name): original}`` of the patched classes, while any hook is installed.
_MONGO_PATCHES: dict[tuple[type, str], Any] = {}
_MONGO_LOCK = threading.Lock()


def _mongo_classes(client: Any) -> tuple[type, type]:
    package = "mongomock" if type(client).__module__.split(".")[0] == "mongomock" else "pymongo"
    collections = importlib.import_module(f"{package}.collection")  # safe: one of two fixed names
    databases = importlib.import_module(f"{package}.database")  # safe: one of two fixed names
    return collections.Collection, databases.Database


def _mongo_patch(cls: type, name: str, is_database: bool) -> None:
    original = cls.__dict__.get(name)
    if original is None or (cls, name) in _MONGO_PATCHES:
        return
    _MONGO_PATCHES[(cls, name)] = original

    def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = self.client if is_database else self.database.client
        hook = _MONGO_HOOKS.get(id(client))
        if hook is None or hook.client is not client:
            return original(self, *args, **kwargs)
        return hook.through(f"mongodb {name} {self.name}", original, self, *args, **kwargs)

    patched.__name__ = getattr(original, "__name__", name)
    patched.__doc__ = getattr(original, "__doc__", None)
    setattr(cls, name, patched)


class _MongoFaults(_Driver):
    """pymongo and mongomock: the methods of ``Collection`` (CRUD, ``find``, indexes) and of
    ``Database`` (``command``, collection listing and creation), patched on the classes while
    an injector is installed and applied only to collections whose ``database.client`` is
    the target client (collections are derived from the client, never held by it). A nested
    call (``find_one`` calling ``find``) counts once. mongomock shares pymongo's exception
    classes when pymongo is installed."""

    name = "pymongo"

    def install(self) -> None:
        collection, database = _mongo_classes(self.client)
        with _MONGO_LOCK:
            _MONGO_HOOKS[id(self.client)] = self
            for name in _COLLECTION_METHODS:
                _mongo_patch(collection, name, is_database=False)
            for name in _DATABASE_METHODS:
                _mongo_patch(database, name, is_database=True)

    def uninstall(self) -> None:
        with _MONGO_LOCK:
            if _MONGO_HOOKS.get(id(self.client)) is self:
                del _MONGO_HOOKS[id(self.client)]
            if not _MONGO_HOOKS:
                for (cls, name), original in _MONGO_PATCHES.items():
                    setattr(cls, name, original)
                _MONGO_PATCHES.clear()

    def error(self, kind: str, what: str) -> BaseException:
        from pymongo import errors

        if kind == TRANSIENT:
            return errors.AutoReconnect(f"connection reset by peer (injected before {what})")
        if kind == THROTTLED:
            return errors.OperationFailure(
                f"IngressRequestRateLimitExceeded (injected at {what})", code=462,
                details={"ok": 0, "code": 462, "codeName": "IngressRequestRateLimitExceeded",
                         "errorLabels": ["SystemOverloadedError", "RetryableError"]},
            )
        if kind == PERMISSION:
            return errors.OperationFailure(
                f"not authorized to execute this command (injected at {what})", code=13,
                details={"ok": 0, "code": 13, "codeName": "Unauthorized"},
            )
        if kind == VALIDATION:
            return errors.OperationFailure(
                f"BadValue (injected at {what})", code=2,
                details={"ok": 0, "code": 2, "codeName": "BadValue"},
            )
        return errors.NetworkTimeout(f"timed out (injected after {what} applied)")


# -- boto3 / botocore --------------------------------------------------------------------------

_CONTEXT_KEY = "reactor_contract_fault"


class _BotoFaults(_Driver):
    """boto3/botocore: handlers on the client's own event system, ``before-call`` (counts
    every API call and fails it before it is sent; botocore's retries happen below it, so an
    injected error is the one botocore gives up with) and ``after-call`` (the
    ``applied_then_timeout`` kind: the call went through, then ``ReadTimeoutError``)."""

    name = "botocore"

    def install(self) -> None:
        self._id = f"reactor-contract-faults-{uuid.uuid4().hex}"
        events = self.client.meta.events
        events.register("before-call", self._before, unique_id=self._id + "-before")
        events.register("after-call", self._after, unique_id=self._id + "-after")

    def uninstall(self) -> None:
        events = self.client.meta.events
        events.unregister("before-call", unique_id=self._id + "-before")
        events.unregister("after-call", unique_id=self._id + "-after")

    def _what(self, model: Any) -> str:
        service = self.client.meta.service_model.service_name
        return f"{service} {getattr(model, 'name', '?')}"

    def _before(self, model: Any = None, context: Any = None, **_: Any) -> None:
        what = self._what(model)
        decided = self.plan.decide(what)
        if decided is None:
            return
        number, kind = decided
        if kind == APPLIED_THEN_TIMEOUT and isinstance(context, dict):
            context[_CONTEXT_KEY] = (number, what)
            return
        error = self.error(kind, what)
        self.plan.record(number, kind, what, error)
        raise error

    def _after(self, context: Any = None, **_: Any) -> None:
        pending = context.pop(_CONTEXT_KEY, None) if isinstance(context, dict) else None
        if pending is None:
            return
        number, what = pending
        error = self.error(APPLIED_THEN_TIMEOUT, what)
        self.plan.record(number, APPLIED_THEN_TIMEOUT, what, error)
        raise error

    def error(self, kind: str, what: str) -> BaseException:
        from botocore import exceptions as bx

        endpoint = str(self.client.meta.endpoint_url)
        if kind == TRANSIENT:
            return bx.EndpointConnectionError(endpoint_url=endpoint)
        if kind == APPLIED_THEN_TIMEOUT:
            return bx.ReadTimeoutError(endpoint_url=endpoint)
        code, status = {
            THROTTLED: ("ThrottlingException", 400),
            PERMISSION: ("AccessDeniedException", 400),
            VALIDATION: ("ValidationException", 400),
        }[kind]
        response: Any = {
            "Error": {"Code": code, "Message": f"injected at {what}"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        operation = what.split(" ", 1)[-1]
        error_class = self.client.exceptions.from_code(code)
        return error_class(response, operation)  # type: ignore[no-any-return]


# -- sqlite3 -----------------------------------------------------------------------------------


class _SQLiteCursorProxy:
    """A :class:`sqlite3.Cursor` whose statements go through the injector."""

    def __init__(self, cursor: sqlite3.Cursor, hook: _SQLiteFaults) -> None:
        object.__setattr__(self, "_cursor", cursor)
        object.__setattr__(self, "_hook", hook)

    def execute(self, sql: str, *args: Any) -> Any:
        """``Cursor.execute`` through the injector (returns this proxy)."""
        self._hook.through(self._hook.what(sql), self._cursor.execute, sql, *args)
        return self

    def executemany(self, sql: str, *args: Any) -> Any:
        """``Cursor.executemany`` through the injector (returns this proxy)."""
        self._hook.through(self._hook.what(sql), self._cursor.executemany, sql, *args)
        return self

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._cursor, name, value)


class _SQLiteConnectionProxy:
    """Stands in for a :class:`sqlite3.Connection` (which takes no attributes) in the
    adapter's attribute while the injector is installed: ``execute``, ``executemany``,
    ``executescript``, ``commit`` and ``cursor()`` go through the injector, the rest is the
    connection's; usable as a context manager like the connection."""

    def __init__(self, connection: sqlite3.Connection, hook: _SQLiteFaults) -> None:
        object.__setattr__(self, "_connection", connection)
        object.__setattr__(self, "_hook", hook)

    def execute(self, sql: str, *args: Any) -> Any:
        """``Connection.execute`` through the injector."""
        return self._hook.through(self._hook.what(sql), self._connection.execute, sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        """``Connection.executemany`` through the injector."""
        return self._hook.through(
            self._hook.what(sql), self._connection.executemany, sql, *args
        )

    def executescript(self, script: str) -> Any:
        """``Connection.executescript`` through the injector."""
        return self._hook.through("sqlite script", self._connection.executescript, script)

    def commit(self) -> None:
        """``Connection.commit`` through the injector."""
        self._hook.through("sqlite COMMIT", self._connection.commit)

    def cursor(self, *args: Any) -> _SQLiteCursorProxy:
        """A cursor whose statements go through the injector."""
        return _SQLiteCursorProxy(self._connection.cursor(*args), self._hook)

    def __enter__(self) -> _SQLiteConnectionProxy:
        self._connection.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any:
        return self._connection.__exit__(kind, exc, tb)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._connection, name, value)


class _SQLiteFaults(_Driver):
    """sqlite3: a :class:`sqlite3.Connection` takes no attributes, so the adapter's attribute
    holding it (the probe's ``(owner, attribute)``) is replaced by a proxy while installed and
    given back the connection on uninstall."""

    name = "sqlite3"

    @staticmethod
    def what(sql: str) -> str:
        """``"sqlite <first word>"`` of a statement."""
        words = sql.split(None, 1)
        return f"sqlite {words[0].upper() if words else '?'}"

    def install(self) -> None:
        setattr(self.owner, self.attribute, _SQLiteConnectionProxy(self.client, self))

    def uninstall(self) -> None:
        setattr(self.owner, self.attribute, self.client)

    def error(self, kind: str, what: str) -> BaseException:
        if kind == TRANSIENT:
            return sqlite3.OperationalError(f"database is locked (injected at {what})")
        if kind == THROTTLED:
            return sqlite3.OperationalError(f"database table is locked (injected at {what})")
        if kind == PERMISSION:
            return sqlite3.OperationalError(
                f"attempt to write a readonly database (injected at {what})"
            )
        if kind == VALIDATION:
            return sqlite3.DatabaseError(f"datatype mismatch (injected at {what})")
        return sqlite3.OperationalError(f"disk I/O error (injected after {what} applied)")


# -- psycopg 3 (+ psycopg_pool) ----------------------------------------------------------------


class _PgCursorProxy:
    """A psycopg cursor whose ``execute``/``executemany`` go through the injector."""

    def __init__(self, cursor: Any, hook: _PsycopgFaults) -> None:
        object.__setattr__(self, "_cursor", cursor)
        object.__setattr__(self, "_hook", hook)

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        """``Cursor.execute`` through the injector (returns this proxy)."""
        self._hook.through(self._hook.what(query), self._cursor.execute, query, *args, **kwargs)
        return self

    def executemany(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        """``Cursor.executemany`` through the injector."""
        return self._hook.through(
            self._hook.what(query), self._cursor.executemany, query, *args, **kwargs
        )

    def __enter__(self) -> _PgCursorProxy:
        self._cursor.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._cursor.__exit__(*exc)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _PgConnectionProxy:
    """A pooled psycopg connection whose ``execute``, ``cursor()`` and ``commit`` go through
    the injector (``transaction()`` and the rest are the connection's)."""

    def __init__(self, connection: Any, hook: _PsycopgFaults) -> None:
        object.__setattr__(self, "_connection", connection)
        object.__setattr__(self, "_hook", hook)

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        """``Connection.execute`` through the injector."""
        return self._hook.through(
            self._hook.what(query), self._connection.execute, query, *args, **kwargs
        )

    def cursor(self, *args: Any, **kwargs: Any) -> _PgCursorProxy:
        """A cursor whose statements go through the injector."""
        return _PgCursorProxy(self._connection.cursor(*args, **kwargs), self._hook)

    def commit(self) -> None:
        """``Connection.commit`` through the injector."""
        self._hook.through("postgres COMMIT", self._connection.commit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._connection, name, value)


class _PsycopgFaults(_Driver):
    """psycopg 3 with psycopg_pool: the pool's ``connection()`` (instance-level) hands out
    proxies of its connections whose statements go through the injector."""

    name = "psycopg"

    @staticmethod
    def what(query: Any) -> str:
        """``"postgres <first word>"`` of a statement (``sql.Composed`` included)."""
        text = query if isinstance(query, (str, bytes)) else repr(query)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        words = text.replace("(", " ").replace("'", " ").split()
        head = next((w for w in words if w.isalpha()), "?")
        return f"postgres {head.upper()}"

    def install(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []
        pool = self.client
        take = pool.connection

        @contextlib.contextmanager
        def connection(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with take(*args, **kwargs) as conn:
                yield _PgConnectionProxy(conn, self)

        _set_instance(pool, "connection", connection, self._saved)

    def uninstall(self) -> None:
        _restore(self._saved)

    def error(self, kind: str, what: str) -> BaseException:
        import psycopg
        from psycopg import errors

        if kind == TRANSIENT:
            return psycopg.OperationalError(
                f"server closed the connection unexpectedly (injected before {what})"
            )
        if kind == THROTTLED:
            return errors.TooManyConnections(
                f"sorry, too many clients already (injected at {what})"
            )
        if kind == PERMISSION:
            return errors.InsufficientPrivilege(
                f"permission denied for table documents (injected at {what})"
            )
        if kind == VALIDATION:
            return errors.DataError(f"invalid input syntax (injected at {what})")
        return psycopg.OperationalError(
            f"consuming input failed: timeout expired (injected after {what} applied)"
        )


# -- choosing the driver -----------------------------------------------------------------------


def _is(client: Any, module: str, name: str) -> bool:
    """Whether ``client`` is an instance of ``module.name`` (never importing a driver that
    is not loaded already: an object of it cannot exist then)."""
    import sys

    loaded = sys.modules.get(module)
    cls = getattr(loaded, name, None) if loaded is not None else None
    return isinstance(cls, type) and isinstance(client, cls)


def _driver_for(client: Any) -> type[_Driver]:
    if _is(client, "redis", "Redis") or _is(client, "redis.cluster", "RedisCluster"):
        return _RedisFaults
    if _is(client, "pymongo", "MongoClient") or _is(client, "mongomock", "MongoClient"):
        return _MongoFaults
    if _is(client, "botocore.client", "BaseClient"):
        return _BotoFaults
    if isinstance(client, sqlite3.Connection):
        return _SQLiteFaults
    if _is(client, "psycopg_pool", "ConnectionPool"):
        return _PsycopgFaults
    raise UnsupportedDriver(
        f"no fault injector for a {type(client).__module__}.{type(client).__qualname__} "
        "(known: redis-py, pymongo, mongomock, boto3/botocore, sqlite3, psycopg_pool; "
        "docs/contract-suite.md, \"Faults injected at the driver\")"
    )


def driver_name(client: object) -> str:
    """The injector's name for ``client``'s driver (``"redis"``, ``"pymongo"``,
    ``"botocore"``, ``"sqlite3"``, ``"psycopg"``).

    Raises:
        UnsupportedDriver: no injector knows the client's type.
    """
    return _driver_for(client).name


class FaultInjector:
    """Counts and fails the requests of an adapter's driver clients (docs/contract-suite.md,
    "Faults injected at the driver").

    Use it as a context manager (``with FaultInjector(pairs) as faults:``), or call
    :meth:`install` and :meth:`uninstall`. Installed, it counts; :meth:`arm` makes request
    number ``at`` (counted from the arming, requests of the arming thread only) fail with a
    kind; :meth:`disarm` stops failing (counting goes on); :meth:`uninstall` restores every
    patched attribute, class and event handler.

    Args:
        clients: ``(owner, attribute)`` pairs naming each driver client:
            ``getattr(owner, attribute)`` is the client (the probe's
            :meth:`reactor_contract.probe.DriverProbe.driver_clients`). The attribute is
            rewritten only for ``sqlite3`` (a proxy while installed).

    Raises:
        UnsupportedDriver: a client is of no known driver.
        ValueError: no client was given.
    """

    def __init__(self, clients: Sequence[tuple[object, str]]) -> None:
        if not clients:
            raise ValueError("FaultInjector needs at least one (owner, attribute) pair")
        self._plan = _Plan()
        self._drivers: list[_Driver] = []
        seen: set[int] = set()
        for owner, attribute in clients:
            client = getattr(owner, attribute)
            if id(client) in seen:
                continue
            seen.add(id(client))
            self._drivers.append(_driver_for(client)(owner, attribute, client, self._plan))

    @property
    def drivers(self) -> list[str]:
        """The driver names of the clients, in the order given (duplicates dropped)."""
        return [driver.name for driver in self._drivers]

    @property
    def requests(self) -> int:
        """Requests of the arming thread counted since the last :meth:`arm`."""
        return self._plan.count

    @property
    def seen(self) -> list[str]:
        """What each counted request was (``"redis EVALSHA"``...), since the last arm."""
        return list(self._plan.requests)

    @property
    def fired(self) -> list[Fired]:
        """The faults injected since the last :meth:`arm`, in order."""
        return list(self._plan.fired)

    def install(self) -> FaultInjector:
        """Hook every client (idempotent); returns this injector.

        Raises:
            Exception: a hook could not be installed (the ones installed are removed).
        """
        if self._plan.installed:
            return self
        done: list[_Driver] = []
        try:
            for driver in self._drivers:
                driver.install()
                done.append(driver)
        except BaseException:
            for driver in reversed(done):
                driver.uninstall()
            raise
        self._plan.installed = True
        self.arm(None)
        return self

    def uninstall(self) -> None:
        """Remove every hook and restore what it replaced; idempotent."""
        if not self._plan.installed:
            return
        self._plan.installed = False
        self._plan.disarm()
        for driver in reversed(self._drivers):
            driver.uninstall()

    def arm(self, at: int | None, kind: str = TRANSIENT, *, times: int = 1) -> None:
        """Restart the count and fail requests ``at`` .. ``at + times - 1`` with ``kind``.

        Args:
            at: the first request to fail, 1-based, counted from now, among the requests of
                the calling thread; ``None`` only counts.
            kind: one of :data:`KINDS`.
            times: how many consecutive requests fail (default 1).

        Raises:
            ValueError: an unknown kind, or ``at``/``times`` below 1.
        """
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; one of {', '.join(KINDS)}")
        if (at is not None and at < 1) or times < 1:
            raise ValueError(f"at and times are >= 1, got at={at!r}, times={times!r}")
        self._plan.arm(at if at is not None else 0, kind, times)
        if at is None:
            self._plan.disarm()

    def disarm(self) -> None:
        """Stop failing requests (they are still counted)."""
        self._plan.disarm()

    def __enter__(self) -> FaultInjector:
        return self.install()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.uninstall()
