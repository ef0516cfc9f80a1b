"""Step Result Records over a :class:`reactor.ports.DocumentStore` (docs/protocol.md#step-results).

Collection ``step_results``, key ``<context id>:<step name>`` (context ids are UUIDs, so the
first ``:`` separates them), ``index`` = the record's status so the step sweeper's
``scan(status="dispatched")`` is an indexed query that filters before its limit. Every put
re-stamps retention to ``context_ttl`` so a record never outlives or pre-expires its parent.
"""

from __future__ import annotations

from reactor.generic._durable import DurableCollection
from reactor.generic._scan import keyset_scan
from reactor.model.records import ScanPage, StepResultRecord
from reactor.ports.documents import DocumentStore
from reactor.ports.serialization import record_from_dict, record_to_dict

__all__ = ["STEP_RESULTS", "DocumentStepResultStore"]

#: Collection of step result records.
STEP_RESULTS = "step_results"


def _key(context_id: str, step_name: str) -> str:
    return f"{context_id}:{step_name}"


class DocumentStepResultStore:
    """:class:`reactor.ports.StepResultStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive.
        context_ttl: retention in seconds after each put (``None`` = keep forever).
    """

    def __init__(self, documents: DocumentStore, *, context_ttl: float | None = 86400.0) -> None:
        self._records = DurableCollection(documents, STEP_RESULTS, context_ttl)

    def put(self, record: StepResultRecord) -> None:
        """Write a record (last writer wins); re-stamps retention to ``context_ttl``.

        Raises:
            TypeError: ``record.data`` holds a value that is not JSON-native.
        """
        self._records.put(
            _key(record.context_id, record.step_name), record_to_dict(record), index=record.status
        )

    def get(self, context_id: str, step_name: str) -> StepResultRecord | None:
        """The record of ``step_name`` owned by ``context_id``, ``None`` when absent/expired."""
        value = self._records.get(_key(context_id, step_name))
        return None if value is None else record_from_dict(StepResultRecord, value)

    def scan(
        self, *, status: str | None = None, limit: int = 1000, cursor: str | None = None
    ) -> ScanPage[StepResultRecord]:
        """List records in key order, ``status`` filtering before ``limit`` (an indexed query).

        Keyset-paged: the cursor is :func:`~reactor.ports.serialization.encode_scan_cursor` of
        ``(status or "", last key examined)`` (docs/workers.md, "Sweep cursors and dispatch
        leases").

        Args:
            status: ``"dispatched"``, ``"completed"`` or ``None`` for all.
            limit: the maximum number of records.
            cursor: ``None`` to start at the beginning, else a ``next_cursor`` of this store.

        Returns:
            The records with ``next_cursor`` (``None`` at the end).

        Raises:
            ValueError: ``cursor`` is malformed.
            StorageError: the backend failed.
        """
        return keyset_scan(
            self._records.documents,
            STEP_RESULTS,
            [status],
            limit=limit,
            cursor=cursor,
            decode=lambda value: record_from_dict(StepResultRecord, value),
        )
