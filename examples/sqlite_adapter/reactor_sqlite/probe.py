"""The contract-suite probe of the SQLite adapter (entry point ``reactor.probes: sqlite``).

The generic probe of :mod:`reactor_contract` knows where the generic stores keep each concern;
the adapter only hands it its document store, whose ``raw``/``set_expiry`` read and rewrite rows
directly (the backdoor).
"""

from __future__ import annotations

from collections.abc import Callable

from reactor_contract import GenericProbe, Probe

from reactor.ports.storage import Storage
from reactor_sqlite.documents import SQLiteDocumentStore
from reactor_sqlite.storage import SQLiteStorage

__all__ = ["SQLiteCleanup", "probe_for"]


def probe_for(storage: Storage) -> Probe:
    """The probe of a :class:`SQLiteStorage`.

    SQLite has no clock, so the probe also offers the optional ``with_clock`` capability
    (:class:`reactor_contract.ClockProbe`): a second ``SQLiteStorage`` on the same database file
    and prefix, with its own connection, whose clock is the given one; ``None`` for a private
    ``:memory:`` database, which no second connection can see (docs/coordination.md#clock-skew).

    Raises:
        TypeError: ``storage`` is not a ``SQLiteStorage``.
    """
    if not isinstance(storage, SQLiteStorage):
        raise TypeError(f"the sqlite probe needs a SQLiteStorage, got {type(storage).__name__}")
    path, prefix = storage.documents.path, storage.documents.prefix
    context_ttl = storage.context_ttl

    def clocked(clock: Callable[[], float]) -> Storage | None:
        """A ``SQLiteStorage`` on the same file and prefix judged by ``clock``."""
        if path == ":memory:":
            return None
        return SQLiteStorage(path, prefix=prefix, context_ttl=context_ttl, clock=clock)

    probe: Probe = GenericProbe(storage.documents, drivers=[(storage.documents, "_conn")],
                               clocked=clocked, cleanup=SQLiteCleanup(storage.documents))
    return probe


class SQLiteCleanup:
    """Empties and lists one store's namespace: the rows whose collection starts with
    ``"<prefix>:"`` (the contract suite's ``CleanupProbe``, docs/contract-suite.md, "Cleanup:
    nothing left behind"). Runs its statements on the store's connection, after the test.

    Args:
        documents: the store whose namespace it empties.
    """

    def __init__(self, documents: SQLiteDocumentStore) -> None:
        self.documents = documents

    def _like(self) -> str:
        prefix = self.documents.prefix + ":"
        return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"

    def purge_namespace(self) -> int:
        """Delete every row of the namespace, expired ones included; returns the count."""
        cursor = self.documents.connection.execute(
            "DELETE FROM documents WHERE collection LIKE ? ESCAPE '\\'", (self._like(),)
        )
        return int(cursor.rowcount)

    def leftovers(self) -> list[str]:
        """``"<collection>/<key>"`` of every row still in the namespace, sorted."""
        rows = self.documents.connection.execute(
            "SELECT collection, key FROM documents WHERE collection LIKE ? ESCAPE '\\' "
            "ORDER BY collection, key",
            (self._like(),),
        ).fetchall()
        return [f"{collection}/{key}" for collection, key in rows]
