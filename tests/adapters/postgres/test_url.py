"""PostgreSQL adapter URLs (docs/adapters/postgres.md, "URL"): reactor's options are split from
libpq's, every option is judged at construction, and hostile input raises
``ConfigurationError`` naming the field (never a driver error, never a leaked password)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from reactor_postgres import router_from_url, storage_from_url
from reactor_postgres._url import MAX_NAME_CHARS, parse_url

from reactor.config import router_from_url as configured_router
from reactor.config import storage_from_url as configured_storage
from reactor.errors import ConfigurationError


def test_reactor_options_are_split_from_the_libpq_uri() -> None:
    parsed = parse_url(
        "postgresql://app:pw@db.example:6543/orders?schema=rx&prefix=t1&queue=jobs"
        "&sslmode=require&application_name=svc"
    )
    assert (parsed.schema, parsed.prefix, parsed.queue) == ("rx", "t1", "jobs")
    assert parsed.conninfo == (
        "postgresql://app:pw@db.example:6543/orders?sslmode=require&application_name=svc"
        "&connect_timeout=5"
    )


def test_defaults_and_the_postgres_scheme() -> None:
    parsed = parse_url("postgres://localhost/app")
    assert (parsed.schema, parsed.prefix, parsed.queue) == ("reactor", "", "default")
    assert parsed.conninfo == "postgresql://localhost/app?connect_timeout=5"
    assert parsed.visibility_timeout(12.0) == 12.0
    assert parsed.pool_max_size() == 10
    assert parse_url("postgresql://h/d?connect_timeout=2").conninfo.endswith("connect_timeout=2")


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("redis://localhost/0", "not a PostgreSQL URL"),
        ("postgresql://h:abc/db", "h:abc"),
        ("postgresql://h:99999/db", "h:99999"),
        ("postgresql://h/db\x00", "NUL"),
        ("postgresql://h/db?schema=", "schema"),
        ("postgresql://h/db?schema=Upper", "schema"),
        ("postgresql://h/db?schema=1abc", "schema"),
        ("postgresql://h/db?schema=a;drop%20table%20x", "schema"),
        ("postgresql://h/db?schema=a%22b", "schema"),
        (f"postgresql://h/db?schema={'s' * 64}", "schema"),
        ("postgresql://h/db?schema=a&schema=b", "twice"),
        ("postgresql://h/db?prefix=a%00b", "prefix"),
        ("postgresql://h/db?prefix=a%0Ab", "prefix"),
        (f"postgresql://h/db?prefix={'p' * (MAX_NAME_CHARS + 1)}", "prefix"),
        ("postgresql://h/db?queue=a%09b", "queue"),
        ("postgresql://h/db?visibility_timeout=0", "visibility_timeout"),
        ("postgresql://h/db?visibility_timeout=nan", "visibility_timeout"),
        ("postgresql://h/db?visibility_timeout=-1", "visibility_timeout"),
        ("postgresql://h/db?context_ttl=soon", "context_ttl"),
        ("postgresql://h/db?pool_max_size=0", "pool_max_size"),
        ("postgresql://h/db?pool_max_size=1.5", "pool_max_size"),
        ("postgresql://h/db?poll_ceiling=0", "poll_ceiling"),
        ("postgresql://h/db?poll_ceiling=inf", "poll_ceiling"),
        ("postgresql://h/db?bogus=1", "bogus"),
        ("postgresql://h/db?connect_timeout=-1", "connect_timeout"),
        ("postgresql://h/db?connect_timeout=soon", "connect_timeout"),
        ("postgresql://h/db?sslmode=maybe", "sslmode"),
        ("postgresql://h/db?clock=sundial", "clock"),
        ("postgresql://h/db?clock=", "clock"),
        ("postgresql://h/db?clock=application&clock_skew_budget=-1", "clock_skew_budget"),
    ],
)
def test_hostile_urls_raise_a_configuration_error_naming_the_field(url: str, named: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_url(url)
    assert named in str(info.value)
    # the factories refuse it the same way, before any connection is attempted
    for factory in (storage_from_url, router_from_url):
        with pytest.raises(ConfigurationError):
            factory(url)


def test_a_password_never_reaches_an_error_message() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_url("postgresql://app:s3cr3t-pw@h/db?bogus=1&schema=ok")
    assert "s3cr3t-pw" not in str(info.value)
    assert "bogus" in str(info.value)


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_both_schemes_resolve_through_the_entry_points(
    service_url: Callable[[str], str], scheme: str
) -> None:
    url = service_url("postgres").replace("postgresql://", f"{scheme}://", 1) + "?schema=t_url"
    storage = configured_storage(url)
    router = configured_router(url)
    try:
        assert type(storage).__name__ == "PostgresStorage"
        assert type(router).__name__ == "PostgresRouter"
    finally:
        storage.close()
        router.close()


def test_libpq_options_keep_their_spaces_escaped() -> None:
    """libpq decodes ``%20`` in a URI but keeps ``+`` literally: a space must reach it as
    ``%20`` (urlencode's ``+`` made ``-c+statement_timeout`` an unknown server setting)."""
    parsed = parse_url("postgresql://h/db?options=-c%20statement_timeout%3D5000")
    assert "options=-c%20statement_timeout%3D5000" in parsed.conninfo
    assert "+" not in parsed.conninfo


@pytest.mark.postgres
def test_a_server_setting_in_options_reaches_the_server(schema_url: str) -> None:
    storage = storage_from_url(f"{schema_url}&options=-c%20statement_timeout%3D4321")
    try:
        with storage.client.connection() as conn:
            row = conn.execute("SHOW statement_timeout").fetchone()
        assert row == ("4321ms",)
    finally:
        storage.close()


@pytest.mark.postgres
def test_the_clock_option_decides_what_the_storage_declares(schema_url: str) -> None:
    server = storage_from_url(schema_url)
    application = storage_from_url(f"{schema_url}&clock=application&clock_skew_budget=0.5")
    try:
        assert (server.capabilities.clock, server.capabilities.clock_skew) == ("server", 0.0)
        assert application.capabilities.clock == "application"
        assert application.capabilities.clock_skew == 0.5
        assert server.capabilities.signals and application.capabilities.signals
    finally:
        server.close()
        application.close()
