"""``DocumentRateLimitStore``: multi-window rate limits over any ``DocumentStore``.

Semantics: docs/protocol.md#rate-limits as implemented by the pure model
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
from reactor.model.records import RateDecision, RateWindow
from reactor.ports.documents import DocumentStore

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

        Each window is judged in its effective bucket, the newer of the document clock's
        bucket and the stored one, so clients whose clocks disagree never reopen an older
        bucket (docs/coordination.md#clock-skew). A denial writes only when it reached a bucket
        not stored yet (an empty counter, at most once per window per bucket).

        Returns:
            The decision; a denial names the first full window (0-based) and the seconds, on
            this store's clock, until that window's effective bucket rolls over.

        Raises:
            StorageError: the backend failed or the compare-and-set kept losing.
        """
        chosen = tuple(windows)
        return self._states.apply(
            key,
            lambda state, now: model.hit(state, now, chosen),
        )

    def count(self, key: str, window: RateWindow) -> int:
        """Admissions charged in the effective bucket of ``window`` (see :meth:`hit`).

        Raises:
            StorageError: the backend failed or the stored document is malformed.
        """
        return self._states.read(
            key,
            lambda state, now: model.count(state, now, window),
        )
