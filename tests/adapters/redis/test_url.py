"""Redis adapter URLs: every option validated at construction (reactor_redis._url).

Parsing needs no server; the last tests use the redis-server from scripts/test for what can
only fail at first use (a database index the server does not have) and an unreachable port.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest

from reactor.config import router_from_url as configured_router
from reactor.config import storage_from_url as configured_storage
from reactor.errors import ConfigurationError, RouterError, StorageError

reactor_redis = pytest.importorskip("reactor_redis")
from reactor_redis._url import DEFAULT_SOCKET_TIMEOUT, parse_url  # noqa: E402


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("redis://127.0.0.1:6390/0?bogus=1", "'bogus'"),
        ("redis://127.0.0.1:6390/abc", "db='abc'"),
        ("redis://127.0.0.1:6390/-1", "db='-1'"),
        ("redis://127.0.0.1:6390/0?db=x", "db='x'"),
        ("redis://127.0.0.1:6390/1?db=2", "two databases"),
        ("redis:///0", "no host"),
        ("redis://:pw@/0", "no host"),
        ("redis://127.0.0.1:abc/0", "malformed"),
        ("redis://127.0.0.1:70000/0", "malformed"),
        ("redis://127.0.0.1:6390/0?socket_timeout=-1", "socket_timeout"),
        ("redis://127.0.0.1:6390/0?socket_timeout=soon", "socket_timeout"),
        ("redis://127.0.0.1:6390/0?socket_timeout=inf", "socket_timeout"),
        ("redis://127.0.0.1:6390/0?socket_connect_timeout=0", "socket_connect_timeout"),
        ("redis://127.0.0.1:6390/0?socket_connect_timeout=", "socket_connect_timeout=''"),
        ("redis://127.0.0.1:6390/0?max_connections=0", "max_connections"),
        ("redis://127.0.0.1:6390/0?socket_keepalive=maybe", "socket_keepalive"),
        ("redis://127.0.0.1:6390/0?visibility_timeout=0", "visibility_timeout"),
        ("redis://127.0.0.1:6390/0?ssl_ca_certs=/ca.pem", "'ssl_ca_certs'"),
        ("rediss://127.0.0.1:6390/0?ssl_cert_reqs=sometimes", "ssl_cert_reqs"),
        ("redis+cluster://127.0.0.1:7000/3", "only database 0"),
        ("memcached://127.0.0.1:6390", "not a Redis URL"),
    ],
)
def test_bad_urls_are_configuration_errors_naming_the_problem(url: str, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named.replace("+", r"\+")):
        parse_url(url)
    if not url.startswith("memcached"):
        for factory in (configured_storage, configured_router):
            with pytest.raises(ConfigurationError):
                factory(url)


def test_documented_options_are_accepted_and_reach_redis_py() -> None:
    url = ("redis://user:p%40ss@127.0.0.1:6390/2?prefix=t-1&visibility_timeout=1&queue=q"
           "&consumer=c&socket_timeout=0.5&socket_connect_timeout=0.25&socket_keepalive=true"
           "&health_check_interval=10&max_connections=7&client_name=me")  # fmt: skip
    parsed = parse_url(url)
    assert (parsed.host, parsed.port, parsed.db) == ("127.0.0.1", 6390, 2)
    assert (parsed.username, parsed.password) == ("user", "p@ss")
    assert parsed.visibility_timeout(30.0) == 1.0
    client = reactor_redis.client_from_url(url)
    try:
        kwargs = client.connection_pool.connection_kwargs
        assert kwargs["db"] == 2
        assert kwargs["username"] == "user" and kwargs["password"] == "p@ss"
        assert kwargs["socket_timeout"] == 0.5
        assert kwargs["socket_connect_timeout"] == 0.25
        assert kwargs["socket_keepalive"] is True
        assert kwargs["health_check_interval"] == 10
        assert kwargs["client_name"] == "me"
        assert client.connection_pool.max_connections == 7
    finally:
        client.close()


def test_defaults_without_options() -> None:
    parsed = parse_url("redis://localhost")
    assert (parsed.port, parsed.db, parsed.socket_timeout) == (6379, 0, DEFAULT_SOCKET_TIMEOUT)
    assert parsed.visibility_timeout(12.0) == 12.0
    client = reactor_redis.client_from_url("redis://localhost/3?socket_timeout=2")
    try:
        kwargs = client.connection_pool.connection_kwargs
        assert kwargs["socket_connect_timeout"] == 2.0  # defaults to the socket timeout
        assert kwargs["db"] == 3
    finally:
        client.close()


def test_the_db_option_accepts_database_0() -> None:
    """``?db=0`` names the first database, as the path ``/0`` does (and is the only one a
    cluster accepts)."""
    assert parse_url("redis://127.0.0.1:6390?db=0").db == 0
    assert parse_url("redis://127.0.0.1:6390/0?db=0").db == 0
    assert parse_url("redis+cluster://127.0.0.1:7000?db=0").db == 0


def test_tls_options_are_accepted_with_rediss() -> None:
    parsed = parse_url("rediss://h:6380/0?ssl_cert_reqs=REQUIRED&ssl_check_hostname=false")
    assert parsed.driver == {"ssl_cert_reqs": "required", "ssl_check_hostname": False}


@pytest.mark.redis
def test_a_database_the_server_lacks_fails_at_first_use(
    service_url: Callable[[str], str],
) -> None:
    base = service_url("redis").rsplit("/", 1)[0]
    storage = configured_storage(f"{base}/9999")  # redis-server has 16 databases by default
    try:
        with pytest.raises(StorageError, match="DB index is out of range"):
            storage.now()
    finally:
        storage.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


def test_an_unreachable_server_fails_in_bounded_time() -> None:
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    storage = configured_storage(url)
    router = configured_router(url)
    try:
        started = time.monotonic()
        with pytest.raises(StorageError):
            storage.now()
        with pytest.raises(RouterError):
            router.receive(max_jobs=1)
        assert time.monotonic() - started < 15.0
    finally:
        storage.close()
        router.close()


def test_a_bad_option_names_the_url_without_its_password() -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        parse_url("redis://user:hunter2@127.0.0.1:6390/0?socket_timeout=-1")
    assert str(excinfo.value) == (
        "Redis URL option socket_timeout='-1' must be > 0 seconds "
        "(in 'redis://user:***@127.0.0.1:6390/0?socket_timeout=-1')"
    )


def test_every_occurrence_of_a_repeated_driver_option_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="max_connections='0' must be >= 1"):
        parse_url("redis://127.0.0.1:6390/0?max_connections=0&max_connections=5")
    assert parse_url("redis://127.0.0.1:6390/0?max_connections=5&prefix=a&prefix=b").options == {
        "prefix": "b"
    }  # fmt: skip
