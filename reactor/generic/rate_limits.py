"""``DocumentRateLimitStore``: multi-window rate limits over any ``DocumentStore``.

Semantics: storage-protocol.md §2.10 as implemented by the pure model
:mod:`reactor.model.coordination.rate_limits` (all windows or none, 0-based denying index);
atomicity: :mod:`reactor.generic._cas`. One document per rate-limit key holds every window's
current bucket, so a multi-window hit is a single compare-and-set::

    {"windows": {"minute/60.0": {"bucket": 28333333, "count": 2, "expires_at": 1700000120.0}}}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reactor.generic._cas import StateCodec, StateCollection
from reactor.model.coordination import rate_limits as model
from reactor.ports.documents import DocumentStore
from reactor.ports.records import RateDecision, RateWindow

__all__ = ["RATE_LIMITS", "RATE_LIMIT_CODEC", "DocumentRateLimitStore"]

#: The default collection of rate-limit key documents (one per key).
RATE_LIMITS = "rate_limits"


def _encode(state: model.RateCounters) -> dict[str, Any]:
    return {
        "windows": {
            wid: {"bucket": c.bucket, "count": c.count, "expires_at": c.expires_at}
            for wid, c in state.windows.items()
        }
    }


def _decode(doc: Mapping[str, Any]) -> model.RateCounters:
    windows: Mapping[str, Any] = doc["windows"]
    return model.RateCounters(
        windows={
            str(wid): model.WindowCounter(
                bucket=int(c["bucket"]), count=int(c["count"]), expires_at=float(c["expires_at"])
            )
            for wid, c in windows.items()
        }
    )


#: The document shape of a rate-limit key.
RATE_LIMIT_CODEC: StateCodec[model.RateCounters] = StateCodec(
    "rate limit", _encode, _decode, model.expiry
)


class DocumentRateLimitStore:
    """A :class:`reactor.ports.RateLimitStore` over a :class:`reactor.ports.DocumentStore`.

    Args:
        documents: the versioned-document primitive (its clock picks the buckets).
        collection: the collection holding one document per rate-limit key.
    """

    def __init__(self, documents: DocumentStore, collection: str = RATE_LIMITS) -> None:
        self._states = StateCollection(documents, collection, RATE_LIMIT_CODEC)

    def hit(self, key: str, windows: Sequence[RateWindow]) -> RateDecision:
        """Check every window and, only if all admit, charge all of them.

        Args:
            key: the rate-limit key.
            windows: the windows, checked in order.

        Returns:
            The decision; a denial names the first full window (0-based) and the seconds
            until it rolls over.

        Raises:
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        chosen = tuple(windows)
        return self._states.apply(
            key,
            lambda state, now: model.hit(state, now, chosen),
        )

    def count(self, key: str, window: RateWindow) -> int:
        """Admissions charged in the current bucket of ``window``."""
        return self._states.read(
            key,
            lambda state, now: model.count(state, now, window),
        )
