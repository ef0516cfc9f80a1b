"""PostgreSQL rows outlive the code (docs/adapters/postgres.md, "Storage"): the one-statement
checkpoint (reactor_postgres/contexts.py) writes the rows the generic context store wrote
before it, and reads and continues the runs that store wrote.

Each run of ``stored/contexts.json`` (documents an earlier version wrote) is saved twice: once
through the previous release's path — the generic ``DocumentContextStore`` over the PostgreSQL
document table — and once through today's ``PostgresStorage``. Today's store loads and appends
to the old rows, and both namespaces hold the same documents: the same collections, the same
head fields and values (but for the fresh nonces, versions and expiries every write draws),
the same chain of pieces and the same listing row.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from reactor_postgres._client import PostgresClient
from reactor_postgres.documents import PostgresDocumentStore
from reactor_postgres.storage import PostgresStorage

from reactor.generic.contexts import (
    CONTEXT_PAGES,
    CONTEXT_SEGMENTS,
    CONTEXTS,
    OLDEST_PIECE_FIELD,
    PAGE_UNTIL_FIELD,
    DocumentContextStore,
)
from reactor.model.records import ContextDelta, ContextRecord

pytestmark = pytest.mark.postgres

STORED: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "stored" / "contexts.json").read_text(encoding="utf-8")
)

#: Head fields every write draws afresh (piece nonces, expiries).
_VOLATILE = {"_last", OLDEST_PIECE_FIELD, PAGE_UNTIL_FIELD}


def _record(name: str) -> ContextRecord:
    doc = STORED[name]
    return ContextRecord(
        context_id=str(doc["context_id"]), reactor=str(doc["reactor"]),
        status=str(doc["status"]), document=json.dumps(doc),
        created_at=float(doc["created_at"]), updated_at=float(doc["updated_at"]),
        parent_context_id=doc.get("parent_context_id"),
        root_context_id=doc.get("root_context_id"), base="b1",
    )


@pytest.fixture
def pg_url(service_url: Callable[[str], str]) -> str:
    """The private cluster scripts/test starts (fails, never skips, without it)."""
    return service_url("postgres")


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def stores(pg_url: str, schema: str) -> Iterator[tuple[DocumentContextStore, PostgresStorage]]:
    """The previous release's context store (prefix ``old``) and today's storage (``new``),
    on one schema."""
    client = PostgresClient(pg_url, schema=schema)
    old = DocumentContextStore(PostgresDocumentStore(client, prefix="old", owns_client=False))
    new = PostgresStorage(client, prefix="new")
    yield old, new
    new.close()


def _rows(documents: PostgresDocumentStore, record: ContextRecord) -> dict[str, Any]:
    """The run's documents, nonces and expiries left out: the head, its chain of piece texts,
    its listing row."""
    head_row = documents.raw(CONTEXTS, record.context_id)
    assert head_row is not None
    head = {k: v for k, v in head_row.value.items() if k not in _VOLATILE}
    texts, key = [], str(head_row.value["_last"])
    while key:
        piece = documents.raw(CONTEXT_SEGMENTS, key)
        assert piece is not None
        texts.append(piece.value["text"])
        key = str(piece.value["prev"])
    pages = documents.scan(CONTEXT_PAGES)
    return {"head": head, "index": head_row.index, "pieces": texts[::-1],
            "pages": [value for _, value in pages]}


@pytest.mark.parametrize("name", sorted(STORED))
def test_todays_store_writes_the_rows_the_generic_store_wrote_and_continues_them(
    stores: tuple[DocumentContextStore, PostgresStorage], name: str
) -> None:
    old, new = stores
    record = _record(name)
    old.save(record)
    new_documents = new.documents
    old_documents = PostgresDocumentStore(new_documents.client, prefix="old",
                                          owns_client=False)

    # today's store reads the run the previous release wrote, and appends to it
    view = PostgresStorage(new_documents.client, prefix="old", owns_client=False)
    assert view.contexts.load(record.context_id) == record
    delta = ContextDelta(context_id=record.context_id, base="b1", position=1,
                         status=record.status, updated_at=record.updated_at + 1,
                         segment='{"s":1}')
    assert view.contexts.append(delta)
    loaded = view.contexts.load(record.context_id)
    assert loaded is not None and loaded.segments == ('{"s":1}',)

    # and writes what the previous release wrote: the same first save, the same append
    new.contexts.save(record)
    assert new.contexts.append(delta)
    assert _rows(new_documents, record) == _rows(old_documents, record)
