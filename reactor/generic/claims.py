"""First-writer-wins claims over a :class:`reactor.ports.DocumentStore`.

Semantics: docs/protocol.md#claims (correlation ids, interrupt resume claims and attempt
counters, run idempotency keys). Every write re-stamps retention to
``now + context_ttl``; a logically expired claim is taken over by a compare-and-set on its
stored version (see :meth:`reactor.generic._durable.DurableCollection.create`).

==========================  =====================================  ===========================
collection                  key                                    value
==========================  =====================================  ===========================
``correlations``            ``<correlation id>``                   ``{context_id}``
``idempotency``             ``<reactor>:<sha256(key) hex>``        ``{context_id, claimed_at}``
``interrupt_resumes``       ``<context id>:<step path>``           ``{payload}``
``interrupt_attempts``      ``<context id>:<step path>``           ``{count}``
==========================  =====================================  ===========================

Idempotency keys are hashed (like the Ruby adapter) so a user key of any length or alphabet
makes a bounded document key; the digest's fixed 64 characters keep ``<reactor>:<digest>``
unambiguous even when the reactor name holds a ``:``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from reactor.generic._durable import DurableCollection, Mutation
from reactor.ports.documents import DocumentStore

__all__ = [
    "CORRELATIONS",
    "IDEMPOTENCY",
    "INTERRUPT_ATTEMPTS",
    "INTERRUPT_RESUMES",
    "DocumentClaimStore",
    "idempotency_document_key",
]

#: Collection of correlation id mappings.
CORRELATIONS = "correlations"
#: Collection of run idempotency keys.
IDEMPOTENCY = "idempotency"
#: Collection of interrupt resume claims (holding the payload).
INTERRUPT_RESUMES = "interrupt_resumes"
#: Collection of invalid-resume attempt counters.
INTERRUPT_ATTEMPTS = "interrupt_attempts"


def idempotency_document_key(reactor: str, key: str) -> str:
    """The document key of a run idempotency claim in :data:`IDEMPOTENCY`.

    The user's key is stored as its SHA-256 digest, so keys of any length and content map to
    short, safe document keys.

    Args:
        reactor: the registered reactor name.
        key: the caller's idempotency key.

    Returns:
        ``"<reactor>:<sha256(key) as 64 hex digits>"``.
    """
    return f"{reactor}:{hashlib.sha256(key.encode('utf-8')).hexdigest()}"


class DocumentClaimStore:
    """:class:`reactor.ports.ClaimStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive.
        context_ttl: retention in seconds after each write (``None`` = keep forever).
    """

    def __init__(self, documents: DocumentStore, *, context_ttl: float | None = 86400.0) -> None:
        self._correlations = DurableCollection(documents, CORRELATIONS, context_ttl)
        self._idempotency = DurableCollection(documents, IDEMPOTENCY, context_ttl)
        self._resumes = DurableCollection(documents, INTERRUPT_RESUMES, context_ttl)
        self._attempts = DurableCollection(documents, INTERRUPT_ATTEMPTS, context_ttl)

    # -- correlation ids ---------------------------------------------------------------------

    def claim_correlation_id(self, correlation_id: str, context_id: str) -> str | None:
        """Map ``correlation_id`` to ``context_id``, first writer wins.

        Re-claiming with the same context id is a no-op that re-stamps retention (as the Ruby
        adapter refreshes the TTL).

        Returns:
            ``None`` when ``context_id`` holds the id now; otherwise the other holder's id.
        """

        def mutate(doc: Mapping[str, Any] | None) -> Mutation[str | None]:
            if doc is not None and doc.get("context_id") != context_id:
                return None, None, str(doc["context_id"])
            return {"context_id": context_id}, None, None

        return self._correlations.update(correlation_id, mutate)

    def correlation_context(self, correlation_id: str) -> str | None:
        """The run holding ``correlation_id``, ``None`` when unclaimed or expired."""
        doc = self._correlations.get(correlation_id)
        return None if doc is None else str(doc["context_id"])

    def release_correlation_id(self, correlation_id: str) -> bool:
        """Delete the mapping; ``True`` when a live mapping was deleted."""
        return self._correlations.delete(correlation_id)

    # -- run idempotency keys ----------------------------------------------------------------

    def claim_idempotency_key(self, reactor: str, key: str, context_id: str) -> str | None:
        """Claim ``key`` for ``reactor`` (scoped per reactor name).

        Returns:
            ``None`` when this call claimed it; otherwise the holder's context id (which is
            ``context_id`` itself when the same run claims twice).
        """
        doc_key = idempotency_document_key(reactor, key)
        now = self._idempotency.documents.now()

        def mutate(doc: Mapping[str, Any] | None) -> Mutation[str | None]:
            if doc is not None:
                return None, None, str(doc["context_id"])
            return {"context_id": context_id, "claimed_at": now}, None, None

        return self._idempotency.update(doc_key, mutate)

    def release_idempotency_key(self, reactor: str, key: str, context_id: str) -> bool:
        """Compare-and-delete: only the holder ``context_id`` releases; ``True`` on success."""
        return self._idempotency.delete(
            idempotency_document_key(reactor, key), lambda doc: doc.get("context_id") == context_id
        )

    def reclaim_idempotency_key(
        self, reactor: str, key: str, from_context_id: str, to_context_id: str
    ) -> bool:
        """Move the key from ``from_context_id`` to ``to_context_id`` (compare-and-set).

        Returns:
            ``True`` when the live holder was ``from_context_id`` and now is
            ``to_context_id`` (retention re-stamped); ``False`` otherwise (nothing changes).
        """
        now = self._idempotency.documents.now()

        def mutate(doc: Mapping[str, Any] | None) -> Mutation[bool]:
            if doc is None or doc.get("context_id") != from_context_id:
                return None, None, False
            return {"context_id": to_context_id, "claimed_at": now}, None, True

        return self._idempotency.update(idempotency_document_key(reactor, key), mutate)

    # -- interrupt resumes -------------------------------------------------------------------

    def claim_interrupt_resume(self, context_id: str, step_path: str, payload: str) -> bool:
        """Claim the resume of the interrupt at ``step_path`` of ``context_id`` (NX).

        The claim holds ``payload`` (raw JSON text) until it expires with the run; it is never
        deleted, so it stays the dedupe marker. ``True`` when this call won.
        """
        return self._resumes.create(f"{context_id}:{step_path}", {"payload": payload})

    def interrupt_resumes(self, context_id: str, step_paths: Sequence[str]) -> dict[str, str]:
        """``{step_path: payload}`` for the claimed step paths only (``{}`` for none)."""
        out: dict[str, str] = {}
        for step_path in step_paths:
            doc = self._resumes.get(f"{context_id}:{step_path}")
            if doc is not None:
                out[step_path] = str(doc["payload"])
        return out

    def increment_interrupt_attempts(self, context_id: str, step_path: str) -> int:
        """Count an invalid resume attempt; returns the new count (re-stamps retention)."""

        def mutate(doc: Mapping[str, Any] | None) -> Mutation[int]:
            count = int((doc or {}).get("count", 0)) + 1
            return {"count": count}, None, count

        return self._attempts.update(f"{context_id}:{step_path}", mutate)
