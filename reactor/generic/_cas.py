"""The compare-and-set loop shared by the generic coordination stores.

A coordination object (one lock, one semaphore, one rate-limit key, one period marker, one
ordered lock) is one document of a :class:`reactor.ports.DocumentStore`. Every operation is:

1. read the :class:`reactor.ports.Versioned` document (``value None`` = absent or expired);
2. decode it to the pure model's state and apply the pure transition with
   ``now = documents.now()`` (read after the document, so a state the store still showed is
   judged no earlier than the read);
3. if the state changed, write it back with ``expected_version`` = the version read
   (``None`` state deletes the document) and ``expires_at`` = the state's overall expiry —
   the latest expiry of any field inside it, so the document's own expiry never cuts short a
   longer-lived field (the ordered lock's epoch outlives the rest of it);
4. on a lost compare-and-set, retry after a tiny randomized backoff, at most
   :data:`MAX_ATTEMPTS` times, then raise :class:`reactor.errors.StorageError`.

Read-only inspectors use :func:`read_state`, which never writes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from reactor.errors import StorageError
from reactor.ports.clock import sleeper
from reactor.ports.documents import DocumentStore

#: This module's own random stream for jitter: library code never draws from the global
#: ``random`` state (a user's seeded stream, property-based tests replaying theirs).
_RANDOM = random.Random()

__all__ = ["MAX_ATTEMPTS", "StateCodec", "StateCollection", "apply", "read_state"]

#: Lost compare-and-sets tolerated for one operation before it raises ``StorageError``.
MAX_ATTEMPTS = 64
#: The largest backoff between two attempts, in seconds.
MAX_BACKOFF = 0.01

S = TypeVar("S")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class StateCodec(Generic[S]):
    """How one coordination state is stored as a JSON-native document.

    Attributes:
        kind: a label for error messages (``"lock"``, ``"semaphore"``, ...).
        encode: state -> JSON-native dict.
        decode: stored dict -> state; may raise ``KeyError``/``TypeError``/``ValueError`` on a
            malformed document.
        expiry: state -> its overall expiry in epoch seconds (``None`` = never), used as the
            document's ``expires_at``.
    """

    kind: str
    encode: Callable[[S], dict[str, Any]]
    decode: Callable[[Mapping[str, Any]], S]
    expiry: Callable[[S], float | None]


def _decode(codec: StateCodec[S], key: str, value: Mapping[str, Any] | None) -> S | None:
    if value is None:
        return None
    try:
        return codec.decode(value)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StorageError(f"malformed {codec.kind} document for key {key!r}") from exc


def read_state(
    documents: DocumentStore,
    collection: str,
    key: str,
    codec: StateCodec[S],
    view: Callable[[S | None, float], R],
) -> R:
    """Read one coordination object and evaluate a read-only ``view(state, now)`` on it.

    Args:
        documents: the document store.
        collection: the collection name.
        key: the object's key.
        codec: the state's codec.
        view: a pure inspector of the model.

    Returns:
        Whatever ``view`` returns.

    Raises:
        StorageError: the backend failed or the stored document is malformed.
    """
    current = documents.read(collection, key)
    state = _decode(codec, key, current.value)
    return view(state, documents.now())


def apply(
    documents: DocumentStore,
    collection: str,
    key: str,
    codec: StateCodec[S],
    transition: Callable[[S | None, float], tuple[S | None, R]],
    *,
    max_attempts: int = MAX_ATTEMPTS,
    sleep: Callable[[float], None] | None = None,
) -> R:
    """Apply a pure transition to one coordination object atomically (a CAS loop).

    Args:
        documents: the document store.
        collection: the collection name.
        key: the object's key.
        codec: the state's codec.
        transition: ``(state, now) -> (new_state, result)`` from :mod:`reactor.model.coordination`.
        max_attempts: compare-and-set attempts before giving up (>= 1).
        sleep: the backoff sleep, injectable for tests (seconds); default ``None``: the
            system's sleep, looked up at call time.

    Returns:
        The transition's result from the attempt whose write won (or that needed no write).

    Raises:
        StorageError: the backend failed, the stored document is malformed, or every attempt
            lost its compare-and-set.
        ValueError: the transition rejected its arguments (e.g. a non-positive TTL).
    """
    pause = sleeper(sleep)
    for attempt in range(max_attempts):
        current = documents.read(collection, key)
        state = _decode(codec, key, current.value)
        new_state, result = transition(state, documents.now())
        if new_state == state:
            return result
        if new_state is None:
            value: dict[str, Any] | None = None
            expires_at: float | None = None
        else:
            value = codec.encode(new_state)
            expires_at = codec.expiry(new_state)
        if documents.write(
            collection, key, value, expected_version=current.version, expires_at=expires_at
        ):
            return result
        if attempt + 1 < max_attempts:
            pause(_RANDOM.uniform(0.0, min(MAX_BACKOFF, 0.0001 * 2**attempt)))
    raise StorageError(
        f"{codec.kind} {key!r}: lost the compare-and-set {max_attempts} times in a row"
    )


@dataclass(frozen=True, slots=True)
class StateCollection(Generic[S]):
    """One collection of coordination objects of one kind: the shared body of every generic
    coordination store (locks, semaphores, rate limits, periods, ordered locks).

    Attributes:
        documents: the document store (its clock judges expiry).
        collection: the collection holding one document per key.
        codec: how the kind's state is stored.
    """

    documents: DocumentStore
    collection: str
    codec: StateCodec[S]

    def apply(self, key: str, transition: Callable[[S | None, float], tuple[S | None, R]]) -> R:
        """:func:`apply` ``transition`` to the object at ``key`` (a compare-and-set loop).

        Raises:
            StorageError: the backend failed, the document is malformed, or every attempt lost.
            ValueError: the transition rejected its arguments.
        """
        return apply(self.documents, self.collection, key, self.codec, transition)

    def read(self, key: str, view: Callable[[S | None, float], R]) -> R:
        """:func:`read_state`: evaluate the read-only ``view(state, now)`` at ``key``.

        Raises:
            StorageError: the backend failed or the stored document is malformed.
        """
        return read_state(self.documents, self.collection, key, self.codec, view)
