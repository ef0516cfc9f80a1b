"""``MemoryProbe``: raw access to a :class:`MemoryDocumentStore` for contract tests.

The contract suite (``contract_tests/reactor_contract/probe.py``) checks retention and expiry
through a probe each adapter provides: read a document as physically stored, force it to
expire now, read its remaining TTL. This is the memory adapter's probe; names follow the
collections and keys documented in each :mod:`reactor.generic` module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactor.memory.documents import MemoryDocumentStore
from reactor.memory.storage import MemoryStorage

__all__ = ["MemoryProbe"]


class MemoryProbe:
    """Probe a memory document store (or the one inside a :class:`MemoryStorage`).

    Args:
        target: the store, or a :class:`MemoryStorage` whose ``documents`` are probed.
    """

    def __init__(self, target: MemoryDocumentStore | MemoryStorage) -> None:
        self.documents = target.documents if isinstance(target, MemoryStorage) else target

    def raw(self, collection: str, key: str) -> Mapping[str, Any] | None:
        """The stored value of a *live* document, ``None`` when absent or logically expired."""
        return self.documents.read(collection, key).value

    def expire(self, collection: str, key: str) -> bool:
        """Force a document to expire now (``expires_at = now``) without changing its version.

        Returns:
            ``True`` when a document was stored, ``False`` when there was nothing to expire.
        """
        return self.documents.set_expiry(collection, key, self.documents.now())

    def ttl(self, collection: str, key: str) -> float | None:
        """Seconds until the document expires.

        Returns:
            The remaining seconds (> 0) of a live document with an expiry; ``None`` when the
            document is absent, logically expired, or never expires (use :meth:`raw` or
            :meth:`exists` to tell these apart).
        """
        found = self.documents.read(collection, key)
        if found.value is None or found.expires_at is None:
            return None
        return found.expires_at - self.documents.now()

    def exists(self, collection: str, key: str) -> bool:
        """Whether a live (unexpired) document is stored under ``key``."""
        return self.documents.read(collection, key).value is not None

    def expires_at(self, collection: str, key: str) -> float | None:
        """The stored ``expires_at`` of a physically stored document (expired or not)."""
        raw = self.documents.raw(collection, key)
        return None if raw is None else raw.expires_at
