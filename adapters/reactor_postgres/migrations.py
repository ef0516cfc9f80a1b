"""The versioned, idempotent schema migration of the PostgreSQL adapter (docs/adapters/postgres.md,
"Schema and migration").

Every table lives in one schema per deployment (the URL's ``schema=``). ``<schema>.schema_version``
records each applied migration (``version``, ``applied_at``). :func:`migrate` applies the
migrations of :data:`MIGRATIONS` whose version is not recorded yet, in order, in **one
transaction** that first takes a transaction-level advisory lock derived from the schema name:
processes starting together serialize on it, the first one creates the tables and the others
find every version recorded and change nothing. Running it again is a no-op (one lock and one
``SELECT``). A migration, once released, is never edited: a change is a new version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "applied_versions", "migrate"]

#: ``(version, statements)``; ``{schema}`` is replaced by the quoted schema identifier.
MIGRATIONS: Sequence[tuple[int, Sequence[str]]] = (
    (
        1,
        (
            # the generic layer's versioned documents (reactor.ports.DocumentStore)
            """
            CREATE TABLE IF NOT EXISTS {schema}.documents (
                collection text COLLATE "C" NOT NULL,
                key text COLLATE "C" NOT NULL,
                value text NOT NULL,
                version text NOT NULL,
                expires_at double precision,
                idx text COLLATE "C",
                PRIMARY KEY (collection, key)
            )
            """,
            "CREATE INDEX IF NOT EXISTS documents_scan"
            " ON {schema}.documents (collection, idx, key)",
            "CREATE INDEX IF NOT EXISTS documents_expiry ON {schema}.documents (expires_at)"
            " WHERE expires_at IS NOT NULL",
            # the router's queue and dead letters
            """
            CREATE TABLE IF NOT EXISTS {schema}.jobs (
                queue text COLLATE "C" NOT NULL,
                id text COLLATE "C" NOT NULL,
                seq bigserial NOT NULL,
                body bytea NOT NULL,
                visible_at double precision NOT NULL,
                receive_count integer NOT NULL DEFAULT 0,
                receipt text,
                PRIMARY KEY (queue, id)
            )
            """,
            "CREATE INDEX IF NOT EXISTS jobs_due ON {schema}.jobs (queue, visible_at, seq)",
            """
            CREATE TABLE IF NOT EXISTS {schema}.dead_letters (
                id bigserial PRIMARY KEY,
                queue text COLLATE "C" NOT NULL,
                message_id text NOT NULL,
                body bytea NOT NULL,
                reason text NOT NULL,
                at double precision NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS dead_letters_queue ON {schema}.dead_letters (queue, id)",
        ),
    ),
)

#: The version a fully migrated schema is at.
SCHEMA_VERSION = MIGRATIONS[-1][0]


def _lock_key(schema: str) -> sql.Composed:
    """The advisory-lock key of a schema's migration (``hashtext`` of a fixed label + name)."""
    return sql.SQL("hashtext({})").format(sql.Literal(f"reactor-migration:{schema}"))


def migrate(connection: Any, schema: str) -> list[int]:
    """Bring ``schema`` to :data:`SCHEMA_VERSION`, creating it when missing.

    Args:
        connection: a psycopg connection (any transaction mode: the work runs in its own
            transaction block, committed or rolled back before returning).
        schema: the schema name (an identifier validated by the URL parser).

    Returns:
        The versions applied by this call, ascending (``[]`` when already up to date).

    Raises:
        psycopg.Error: the server refused a statement (callers translate it to
            ``StorageError``/``RouterError``).
    """
    ident = sql.Identifier(schema)
    applied: list[int] = []
    with connection.transaction():
        connection.execute(
            sql.SQL("SELECT pg_advisory_xact_lock({})").format(_lock_key(schema))
        )
        connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        connection.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.schema_version (version integer PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(ident)
        )
        done = {
            row[0]
            for row in connection.execute(
                sql.SQL("SELECT version FROM {}.schema_version").format(ident)
            ).fetchall()
        }
        for version, statements in MIGRATIONS:
            if version in done:
                continue
            for statement in statements:
                connection.execute(sql.SQL(statement).format(schema=ident))
            connection.execute(
                sql.SQL("INSERT INTO {}.schema_version (version) VALUES (%s)").format(ident),
                (version,),
            )
            applied.append(version)
    return applied


def applied_versions(connection: Any, schema: str) -> list[int]:
    """The versions recorded in ``<schema>.schema_version``, ascending (``[]`` before any).

    Raises:
        psycopg.Error: the server failed.
    """
    exists = connection.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f'"{schema}".schema_version',)
    ).fetchone()
    if not exists or not exists[0]:
        return []
    rows = connection.execute(
        sql.SQL("SELECT version FROM {}.schema_version ORDER BY version").format(
            sql.Identifier(schema)
        )
    ).fetchall()
    return [int(row[0]) for row in rows]
