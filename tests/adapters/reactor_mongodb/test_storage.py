"""MongoStorage: the capabilities it declares (docs/adapters/mongodb.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from reactor_mongodb import MONGO_CAPABILITIES
from reactor_mongodb.documents import MongoDocumentStore
from reactor_mongodb.storage import MongoStorage


def test_mongo_capabilities_is_what_a_default_storage_declares(
    mongo_db: tuple[str, Any],
) -> None:
    """``MONGO_CAPABILITIES`` is the declaration of a storage with the default document limit
    and the server clock on a server without change streams (mongomock, a standalone
    ``mongod``): no signals; on one with change streams (SecantusDB) only ``signals``
    differs."""
    backend, db = mongo_db
    storage = MongoStorage(MongoDocumentStore(db, clock="server"))
    try:
        if backend == "mongomock":
            assert storage.capabilities == MONGO_CAPABILITIES
        else:  # SecantusDB emulates change streams
            assert storage.capabilities == replace(MONGO_CAPABILITIES, signals=True)
    finally:
        storage.close()


@pytest.mark.parametrize(("clock", "skew"), [("server", 0.0), ("application", 2.5)])
def test_the_clock_skew_budget_is_declared_only_with_the_application_clock(
    mongo_db: tuple[str, Any], clock: str, skew: float
) -> None:
    """``capabilities.clock_skew`` is the store's ``clock_skew_budget`` with the application
    clock (processes' own clocks may differ by it), and 0 with the server clock, which every
    process shares (docs/coordination.md, "Clock skew")."""
    documents = MongoDocumentStore(mongo_db[1], clock=clock, clock_skew_budget=2.5)
    storage = MongoStorage(documents)
    try:
        assert (storage.capabilities.clock, storage.capabilities.clock_skew) == (clock, skew)
    finally:
        storage.close()
