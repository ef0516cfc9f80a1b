"""``DocumentScheduleStore``: stored schedules over a ``DocumentStore``.

Collection ``schedules``, key = the schedule name, value ``{"document": <opaque text>,
"version": <token>}``, never expiring. The token is this store's own (a fresh UUID per write)
so that :meth:`DocumentScheduleStore.put` can return it; every write is one compare-and-set on
the document store's version of what was read. Semantics: :class:`reactor.ports.ScheduleStore`
(docs/protocol.md, "Schedules").
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from reactor.errors import StorageError
from reactor.generic._durable import require_after
from reactor.model.records import ScheduleRecord
from reactor.ports.documents import DocumentStore

__all__ = ["SCHEDULES", "DocumentScheduleStore"]

#: Collection of stored schedules, one document per schedule name.
SCHEDULES = "schedules"


def _record(name: str, value: Mapping[str, Any] | None) -> ScheduleRecord | None:
    if value is None:
        return None
    document, version = value.get("document"), value.get("version")
    if not isinstance(document, str) or not isinstance(version, str):
        raise StorageError(f"malformed schedule document for {name!r}")
    return ScheduleRecord(name=name, document=document, version=version)


class DocumentScheduleStore:
    """:class:`reactor.ports.ScheduleStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive.
    """

    def __init__(self, documents: DocumentStore) -> None:
        self._documents = documents

    def get(self, name: str) -> ScheduleRecord | None:
        """The schedule ``name``, ``None`` when none is stored.

        Raises:
            StorageError: the backend failed, or the stored document is malformed.
        """
        return _record(name, self._documents.read(SCHEDULES, name).value)

    def put(self, name: str, document: str, *, expected_version: str | None) -> str | None:
        """Write ``document`` if the stored version is ``expected_version`` (``None``: only
        when absent); the new version, or ``None`` when the version differed.

        Raises:
            StorageError: the backend failed.
        """
        current = self._documents.read(SCHEDULES, name)
        stored = _record(name, current.value)
        if (stored.version if stored is not None else None) != expected_version:
            return None
        version = uuid.uuid4().hex
        written = self._documents.write(
            SCHEDULES, name, {"document": document, "version": version},
            expected_version=current.version, expires_at=None,
        )
        return version if written else None

    def delete(self, name: str, *, expected_version: str) -> bool:
        """Delete ``name`` if its stored version is ``expected_version``.

        Raises:
            StorageError: the backend failed.
        """
        current = self._documents.read(SCHEDULES, name)
        stored = _record(name, current.value)
        if stored is None or stored.version != expected_version:
            return False
        return self._documents.write(
            SCHEDULES, name, None, expected_version=current.version, expires_at=None
        )

    def scan(self, *, after: str | None = None, limit: int = 100) -> list[ScheduleRecord]:
        """Stored schedules in ascending name order, strictly after ``after``.

        Raises:
            ValueError: ``limit`` is below 1.
            StorageError: the backend failed.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
        found: list[ScheduleRecord] = []
        for key, value in self._documents.scan(SCHEDULES, after=after, limit=limit):
            require_after(SCHEDULES, after, key)
            record = _record(key, value)
            if record is not None:
                found.append(record)
        return found
