"""The contract-suite probe of the SQLite adapter (entry point ``reactor.probes: sqlite``).

The generic probe of :mod:`reactor_contract` knows where the generic stores keep each concern;
the adapter only hands it its document store, whose ``raw``/``set_expiry`` read and rewrite rows
directly (the backdoor).
"""

from __future__ import annotations

from reactor_contract import GenericProbe, Probe

from reactor.ports.storage import Storage
from reactor_sqlite.storage import SQLiteStorage

__all__ = ["probe_for"]


def probe_for(storage: Storage) -> Probe:
    """The probe of a :class:`SQLiteStorage`.

    Raises:
        TypeError: ``storage`` is not a ``SQLiteStorage``.
    """
    if not isinstance(storage, SQLiteStorage):
        raise TypeError(f"the sqlite probe needs a SQLiteStorage, got {type(storage).__name__}")
    probe: Probe = GenericProbe(storage.documents)
    return probe
