"""Durable and coordination stores over any :class:`reactor.ports.DocumentStore`.

An adapter that implements the versioned-document primitive (``reactor/ports/documents.py``) gets
every sub-store of :class:`reactor.ports.Storage` from here (docs/protocol.md#document-stores):
import :class:`reactor.generic.storage.GenericStorage` and pass it the document store.

Modules (one concept each): ``contexts``, ``step_results``, ``maps``, ``map_rollbacks``,
``claims`` (durable run state, retention ``context_ttl`` re-stamped on every write) and
``locks``, ``semaphores``, ``rate_limits``, ``periods``, ``ordered_locks`` (coordination).

Public for adapters that run a compare-and-set loop of their own: :func:`attempts`, the
attempt numbers with the backoff between lost compare-and-sets that every loop here uses
(docs/protocol.md, "Document stores").
"""

from __future__ import annotations

from reactor.generic._durable import attempts

__all__ = ["attempts"]
