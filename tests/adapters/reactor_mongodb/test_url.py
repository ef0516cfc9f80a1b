"""MongoDB adapter URLs: database from the path, reactor options kept from the driver."""

from __future__ import annotations

import pytest
from reactor_mongodb import storage_from_url
from reactor_mongodb._url import parse_url

from reactor.config import storage_from_url as configured_storage
from reactor.model.errors import ConfigurationError


def test_database_and_reactor_options_are_split_from_the_driver_uri() -> None:
    parsed = parse_url("mongodb://h1:27017,h2/app?prefix=rx_&replicaSet=rs0&clock=application")
    assert parsed.database == "app"
    assert parsed.options == {"prefix": "rx_", "clock": "application"}
    assert parsed.client_uri == "mongodb://h1:27017,h2/?replicaSet=rs0"


def test_default_database_and_srv_scheme() -> None:
    parsed = parse_url("mongodb+srv://cluster.example.com/")
    assert parsed.database == "reactor"
    assert parsed.client_uri.startswith("mongodb+srv://cluster.example.com/")


@pytest.mark.parametrize(
    "url", ["redis://localhost/0", "mongodb://h/bad.name", "mongodb://h/has%20space"]
)
def test_bad_urls_are_configuration_errors(url: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_url(url)


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
