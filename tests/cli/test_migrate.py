"""``reactor migrate``: a backend with a versioned schema (PostgreSQL) is brought up to date
once, a second call changes nothing, any other backend has nothing to migrate; a bad URL is
exit 2 and an unreachable server exit 1 with one line naming it (docs/adapters/postgres.md,
"Schema and migration")."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from reactor import cli, config

runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    monkeypatch.delenv("REACTOR_ROUTER_URL", raising=False)
    yield
    config.reset()


def test_a_backend_without_a_schema_has_nothing_to_migrate() -> None:
    out = runner.invoke(cli.app, ["migrate", "--storage", "memory://", "--router", "local://"])
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines() == [
        "storage memory://: nothing to migrate (MemoryStorage)",
        "router local://: nothing to migrate (LocalRouter)",
    ]


def test_a_bad_option_is_a_usage_error_naming_it() -> None:
    out = runner.invoke(cli.app, ["migrate", "--storage", "postgresql://h/db?migrate=later"])
    assert out.exit_code == 2, out.output
    assert "migrate='later' must be 'auto' or 'never'" in out.stderr


def test_an_unreachable_server_fails_with_one_line_naming_the_backend() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    url = f"postgresql://app:hunter2@127.0.0.1:{port}/db?connect_timeout=1&pool_max_size=1"
    out = runner.invoke(cli.app, ["migrate", "--storage", url])
    assert out.exit_code == 1, out.output
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr  # one line, the server's own reason in it
    assert "error: storage postgresql://app:***@127.0.0.1:" in out.stderr
    assert "migration failed: StorageError" in out.stderr and "hunter2" not in out.stderr
    assert "Connection refused" in out.stderr or "connection failed" in out.stderr


@pytest.mark.postgres
def test_a_bad_router_url_stops_before_the_storage_is_migrated(
    service_url: Callable[[str], str]
) -> None:
    base = service_url("postgres")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    out = runner.invoke(cli.app, ["migrate", "--storage", f"{base}?schema={schema}",
                                  "--router", f"{base}?schema={schema}&visibility_timeout=0"])
    assert out.exit_code == 2, out.output
    assert out.stdout == "" and "bad router URL" in out.stderr
    with psycopg.connect(base, autocommit=True) as conn:
        found = conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()
    assert found == (None,)  # nothing was migrated


@pytest.mark.postgres
def test_postgres_is_migrated_once(service_url: Callable[[str], str]) -> None:
    base = service_url("postgres")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = f"{base}?schema={schema}"
    try:
        out = runner.invoke(cli.app, ["migrate", "--storage", url, "--router", url])
        assert out.exit_code == 0, out.output
        assert out.stdout.splitlines() == [
            f"storage {url.replace('reactor@', '***@')}: applied 1",
            f"router {url.replace('reactor@', '***@')}: already up to date",
        ]
        again = runner.invoke(cli.app, ["migrate", "--storage", url])
        assert again.stdout.strip().endswith(": already up to date"), again.output
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(schema)))
