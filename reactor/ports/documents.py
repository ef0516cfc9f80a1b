"""The versioned-document primitive: the smallest thing an adapter can implement.

A backend that offers a compare-and-set on one document (a SQL row, a MongoDB document, a
DynamoDB item, a file) implements :class:`DocumentStore` and gets every sub-store of
:class:`reactor.ports.Storage` from :mod:`reactor.generic` (docs/protocol.md#document-stores;
docs/writing-an-adapter.md): correct coordination comes with the core's generic stores.
Native fast paths are optional overrides.

Semantics:

* Documents live in named collections under string keys; values are JSON-native dicts.
* Every stored document has an opaque ``version`` token that changes on every write (use a
  fresh UUID, not a counter, so a delete-and-recreate can never pass an old compare: no ABA).
* A document with ``expires_at <= now()`` is **logically absent**: :meth:`DocumentStore.read`
  returns ``value=None`` but still reports the stored ``version`` so a caller can take the
  expired document over with a compare-and-set.
* :meth:`DocumentStore.write` succeeds only when the stored version equals
  ``expected_version`` (``None`` = no document physically stored).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["DocumentStore", "RawDocument", "Versioned"]


@dataclass(frozen=True, slots=True)
class Versioned:
    """A document read from a :class:`DocumentStore`.

    Attributes:
        value: the document, or ``None`` when absent or logically expired.
        version: the stored version token, ``None`` when nothing is physically stored.
        expires_at: the stored expiry in epoch seconds (``None`` = never), meaningful only
            when ``value`` is not ``None``.
    """

    value: Mapping[str, Any] | None
    version: str | None
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class RawDocument:
    """A physically stored document, expired or not: what an adapter's probe backdoor returns.

    Not part of :class:`DocumentStore`; adapters whose probes read raw documents (the
    ``raw(collection, key)`` backdoor of ``reactor_contract.generic_probe``) share this type.

    Attributes:
        value: the stored JSON-native dict.
        version: the stored version token.
        expires_at: the logical expiry in epoch seconds, ``None`` = never.
        index: the ``index`` string it was written with, or ``None``.
    """

    value: dict[str, Any]
    version: str
    expires_at: float | None
    index: str | None


@runtime_checkable
class DocumentStore(Protocol):
    """A keyed store of versioned JSON documents with compare-and-set writes."""

    def now(self) -> float:
        """The store's clock in epoch seconds (used for every expiry decision)."""
        ...

    def read(self, collection: str, key: str) -> Versioned:
        """Read one document (logical expiry applied to ``value``, not to ``version``)."""
        ...

    def write(
        self,
        collection: str,
        key: str,
        value: Mapping[str, Any] | None,
        *,
        expected_version: str | None,
        expires_at: float | None,
        index: str | None = None,
    ) -> bool:
        """Compare-and-set one document.

        Args:
            collection: the collection name.
            key: the document key.
            value: the new document, or ``None`` to delete it.
            expected_version: the version the caller read (``None``: must be physically absent).
            expires_at: epoch seconds after which the document reads as absent; ``None`` = never.
            index: an optional string that :meth:`scan` can filter on (e.g. a status); stored
                beside the document and indexed by the backend.

        Returns:
            ``True`` when written; ``False`` when the stored version differed (nothing changed).

        Raises:
            StorageError: the backend failed.
        """
        ...

    def scan(
        self,
        collection: str,
        *,
        index: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, Mapping[str, Any]]]:
        """List unexpired documents in key order.

        Args:
            collection: the collection name.
            index: only documents written with this ``index`` value (``None``: all documents).
            after: only keys strictly greater than this one (keyset paging).
            limit: the maximum number of documents.

        Returns:
            ``(key, value)`` pairs in ascending key order.
        """
        ...

    def close(self) -> None:
        """Release resources; idempotent."""
        ...
