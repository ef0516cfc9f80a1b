"""MongoDB adapter URLs: database from the path, reactor options kept from the driver.

Also: every option is validated at construction, and default driver timeouts bound how long an
unreachable server can block (docs/adapters/mongodb.md "Timeouts").
"""

from __future__ import annotations

import socket
import time
from urllib.parse import parse_qsl, urlsplit

import pytest
from reactor_mongodb import router_from_url, storage_from_url
from reactor_mongodb._url import DEFAULT_TIMEOUTS_MS, parse_url

from reactor.config import storage_from_url as configured_storage
from reactor.errors import ConfigurationError, RouterError, StorageError
from reactor.ports.router import Job

_DEFAULTS = "serverSelectionTimeoutMS=5000&connectTimeoutMS=5000&socketTimeoutMS=10000"


def test_database_and_reactor_options_are_split_from_the_driver_uri() -> None:
    parsed = parse_url("mongodb://h1:27017,h2/app?prefix=rx_&replicaSet=rs0&clock=application")
    assert parsed.database == "app"
    assert parsed.options == {"prefix": "rx_", "clock": "application"}
    assert parsed.client_uri == f"mongodb://h1:27017,h2/?replicaSet=rs0&{_DEFAULTS}"


def test_default_database_and_srv_scheme() -> None:
    parsed = parse_url("mongodb+srv://cluster.example.com/")
    assert parsed.database == "reactor"
    assert parsed.client_uri.startswith("mongodb+srv://cluster.example.com/")


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("redis://localhost/0", "not a MongoDB URL"),
        ("mongodb://h/bad.name", "bad.name"),
        ("mongodb://h/has%20space", "has space"),
        ("mongodb:///app", "no host"),
        ("mongodb://user:pw@/app", "no host"),
        ("mongodb://h:abc/app", "h:abc"),
        ("mongodb://h:99999/app", "h:99999"),
        ("mongodb://h1,/app", "h1,"),
        ("mongodb+srv://cluster.example.com:27017/app", "without a port"),
        ("mongodb://h/app?bogus=1", "bogus"),
        ("mongodb://h/app?serverSelectionTimeoutMS=-1", "serverSelectionTimeoutMS"),
        ("mongodb://h/app?connectTimeoutMS=abc", "connectTimeoutMS"),
        ("mongodb://h/app?socketTimeoutMS=-5", "socketTimeoutMS"),
        ("mongodb://h/app?directConnection=maybe", "directConnection"),
        ("mongodb://h/app?gc_grace=-1", "gc_grace"),
        ("mongodb://h/app?gc_grace=soon", "gc_grace"),
        ("mongodb://h/app?visibility_timeout=0", "visibility_timeout"),
        ("mongodb://h/app?visibility_timeout=nan", "visibility_timeout"),
        ("mongodb://h/app?clock=sundial", "clock"),
    ],
)
def test_bad_urls_are_configuration_errors_naming_the_problem(url: str, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named.replace("+", r"\+")):
        parse_url(url)
    if url.startswith("mongodb"):
        with pytest.raises(ConfigurationError):
            configured_storage(url)


def test_the_contract_suites_options_are_accepted() -> None:
    parsed = parse_url("mongodb://h/app?prefix=t-1&visibility_timeout=1&queue=q&gc_grace=0")
    assert parsed.options == {
        "prefix": "t-1", "visibility_timeout": "1", "queue": "q", "gc_grace": "0"
    }  # fmt: skip


def test_default_timeouts_are_added_unless_the_url_sets_them_in_any_case() -> None:
    defaults = dict(parse_qsl(urlsplit(parse_url("mongodb://h/app").client_uri).query))
    assert defaults == {k: str(v) for k, v in DEFAULT_TIMEOUTS_MS.items()}
    own = parse_url("mongodb://h/app?serverselectiontimeoutms=250&socketTimeoutMS=0")
    query = parse_qsl(urlsplit(own.client_uri).query)
    assert ("serverselectiontimeoutms", "250") in query
    assert ("socketTimeoutMS", "0") in query
    assert [k for k, _ in query if k.lower() == "serverselectiontimeoutms"] == [
        "serverselectiontimeoutms"
    ]
    assert ("connectTimeoutMS", "5000") in query


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


def test_an_unreachable_server_fails_operations_in_bounded_time() -> None:
    url = f"mongodb://127.0.0.1:{_closed_port()}/app"
    started = time.monotonic()
    storage = storage_from_url(url)
    router = router_from_url(url)
    built = time.monotonic() - started
    try:
        assert built < 5.0  # the signals probe waits at most PROBE_TIMEOUT (1 s)
        started = time.monotonic()
        with pytest.raises(StorageError):
            storage.documents.write("contexts", "k", {"a": 1}, expected_version=None,
                                    expires_at=None)  # fmt: skip
        assert time.monotonic() - started < 15.0  # serverSelectionTimeoutMS=5000
        started = time.monotonic()
        with pytest.raises(RouterError):
            router.enqueue(Job(kind="run", payload={}))
        assert time.monotonic() - started < 15.0
    finally:
        storage.close()
        router.close()


def test_factory_accepts_and_ignores_unknown_settings() -> None:
    storage = configured_storage(
        "mongomock://urltest/db?prefix=u_", context_ttl=120.0, visibility_timeout=3, other=1
    )
    try:
        assert storage.capabilities.signals is False
        assert storage.capabilities.max_document_bytes is not None
        assert storage.capabilities.clock == "application"
    finally:
        storage.close()


def test_server_factory_builds_without_connecting() -> None:
    # pymongo connects lazily: building the storage must not need a server.
    storage = storage_from_url(
        "mongodb://127.0.0.1:1/app?serverSelectionTimeoutMS=50", context_ttl=5.0
    )
    assert storage.documents.database.name == "app"
    assert storage.capabilities.clock == "server"
    storage.close()


def test_a_bad_reactor_option_names_the_url_without_its_password() -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        parse_url("mongodb://app:hunter2@h/app?gc_grace=-1")
    assert str(excinfo.value) == (
        "MongoDB URL option gc_grace='-1' must be >= 0 seconds "
        "(in 'mongodb://app:***@h/app?gc_grace=-1')"
    )


def test_reactor_options_are_read_typed() -> None:
    parsed = parse_url("mongodb://h/app?clock=application&gc_grace=0&visibility_timeout=2.5")
    assert (parsed.clock(), parsed.gc_grace(), parsed.visibility_timeout()) == (
        "application", 0.0, 2.5
    )
    assert parse_url("mongodb://h/app").clock("application") == "application"
    with pytest.raises(ConfigurationError, match="clock='' must be 'server' or 'application'"):
        parse_url("mongodb://h/app?clock=")


@pytest.mark.parametrize(
    ("option", "problem"),
    [("gcgrace=5", "Unknown option"),
     ("serverSelectionTimeoutMS=-1", "must be greater than 0"),
     ("directConnection=maybe", "directConnection")],
)
def test_a_bad_driver_option_is_named_with_reactors_own_options(option: str, problem: str) -> None:
    """An unknown driver option (a misspelt reactor option, say) or a bad value is refused on
    its own, the message naming it, pymongo's reason and reactor's own options, the options a
    user may have meant (not reported as a conflict between options)."""
    name, _, value = option.partition("=")
    with pytest.raises(ConfigurationError) as excinfo:
        parse_url(f"mongodb://h/app?replicaSet=rs0&{option}")
    message = str(excinfo.value)
    assert message.startswith(f"MongoDB URL option {name}={value!r} is not accepted (")
    assert problem in message
    assert ("reactor's own options are clock, clock_skew_budget, gc_grace, prefix, queue, "
            "visibility_timeout") in message
    assert "conflicting" not in message


@pytest.mark.parametrize(
    ("options", "named"),
    [("ssl=true&tls=false", "ssl and tls"),
     ("tlsInsecure=true&tlsAllowInvalidCertificates=true",
      "tlsInsecure and tlsAllowInvalidCertificates")],
)
def test_driver_options_valid_alone_but_conflicting_are_configuration_errors(
    options: str, named: str
) -> None:
    """Options each valid on its own that pymongo refuses together raise reactor's
    ``ConfigurationError`` at construction, naming the conflict and the URL without its
    password (never a driver error, never at first use)."""
    url = f"mongodb://app:hunter2@h/app?{options}"
    with pytest.raises(ConfigurationError, match="conflicting MongoDB URL options") as excinfo:
        parse_url(url)
    assert named in str(excinfo.value) and "hunter2" not in str(excinfo.value)
    with pytest.raises(ConfigurationError, match="conflicting MongoDB URL options"):
        configured_storage(url)


def test_the_typed_readers_give_the_documented_defaults_when_the_url_sets_nothing() -> None:
    """``MongoURL`` (what ``build_storage``/``build_router`` take) reads an absent option as
    its documented default (module docstring of ``reactor_mongodb._url``): the server clock,
    ``gc_grace`` 60 s, ``clock_skew_budget`` 1 s, ``visibility_timeout`` 30 s."""
    parsed = parse_url("mongodb://h/app")
    assert (parsed.clock(), parsed.gc_grace(), parsed.clock_skew_budget(),
            parsed.visibility_timeout()) == ("server", 60.0, 1.0, 30.0)  # fmt: skip
