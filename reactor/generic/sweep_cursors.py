"""``DocumentSweepCursorStore``: each sweeper's scan cursor over a ``DocumentStore``.

Collection ``sweep_cursors``, key = the sweeper name (``runs``, ``steps``, ``maps``,
``map_rollbacks``), value ``{"cursor": <opaque text> | null}``, re-stamped to ``context_ttl`` on
every save (a sweep chain that stopped for longer than that starts over, which is harmless).
Semantics: :class:`reactor.ports.SweepCursorStore`; docs/workers.md, "Sweep cursors and
dispatch leases".
"""

from __future__ import annotations

from reactor.generic._durable import DurableCollection
from reactor.ports.documents import DocumentStore

__all__ = ["SWEEP_CURSORS", "DocumentSweepCursorStore"]

#: Collection of sweeper cursors, one document per sweeper.
SWEEP_CURSORS = "sweep_cursors"


class DocumentSweepCursorStore:
    """:class:`reactor.ports.SweepCursorStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive.
        ttl: seconds a saved cursor lives after its last save (``None`` = forever).
    """

    def __init__(self, documents: DocumentStore, *, ttl: float | None = 86400.0) -> None:
        self._cursors = DurableCollection(documents, SWEEP_CURSORS, ttl)

    def load(self, sweeper: str) -> str | None:
        """The cursor saved for ``sweeper``, ``None`` when none (or it expired).

        Raises:
            StorageError: the backend failed.
        """
        doc = self._cursors.get(sweeper)
        cursor = None if doc is None else doc.get("cursor")
        return cursor if isinstance(cursor, str) else None

    def save(self, sweeper: str, cursor: str | None) -> None:
        """Save ``sweeper``'s cursor (last writer wins); ``None`` means "start over".

        Raises:
            StorageError: the backend failed.
        """
        self._cursors.put(sweeper, {"cursor": cursor})
