"""One held lock or semaphore slot and the ways to release it (docs/coordination.md,
"Renewal and loss", "Holds"): :class:`Held`, :func:`release_quietly`, :func:`release_parked`,
and the building of a coordination client (a lease the backend cannot honour is a
configuration error).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from reactor.coordination.lock import Lock
from reactor.coordination.semaphore import Semaphore
from reactor.errors import (
    ConfigurationError,
    LockLost,
)
from reactor.model.engine_state import ParkedHold
from reactor.model.step_context import Hold

if TYPE_CHECKING:
    from reactor.ports.storage import Storage

log = logging.getLogger("reactor.coordination")


HoldScope = Literal["reactor", "step"]

_C = TypeVar("_C")


def build_client(build: Callable[[], _C]) -> _C:
    """Build a coordination client; a lease the backend cannot honour is a configuration error
    (a permanent failure of the unit, never retried)."""
    try:
        return build()
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def skew_budget(storage: Storage) -> float:
    """The storage's clock-skew budget in seconds (``docs/coordination.md``, "Clock skew")."""
    return float(storage.capabilities.clock_skew)


@dataclass
class Held:
    """One lock or semaphore slot held by a unit.

    Attributes:
        key: the primitive's key.
        client: the client holding it.
        refused: its release answered ``False`` (it had lapsed or changed hands).
    """

    key: str
    client: Lock | Semaphore
    refused: bool = False

    def record(self) -> ParkedHold:
        """What a park keeps of this hold for the redelivery to re-adopt."""
        if isinstance(self.client, Lock):
            return ParkedHold("lock", self.key, self.client.owner)
        return ParkedHold("semaphore", self.key, self.client.holder)

    def lost(self) -> LockLost | None:
        """The loss the client knows of (refused extend, passed deadline, refused release)."""
        return self.client.lost

    def view(self, scope: HoldScope) -> Hold:
        """The read-only :class:`Hold` a step body sees."""
        if isinstance(self.client, Lock):
            return Hold("lock", self.key, scope, fencing_token=self.client.token or None,
                        probe=self.lost)
        return Hold("semaphore", self.key, scope, probe=self.lost)

    def release(self) -> None:
        """Release the hold (:func:`release_quietly`); a refused release marks it lost."""
        self.refused = release_quietly(self.client.release, self.key) is False


def release_quietly(release: Callable[[], bool], key: str, *, event: str = "release") -> (
    bool | None
):
    """Release a lock or semaphore lease; never raises (a lost release only lets the lease
    lapse with its TTL, docs/coordination.md, "Renewal and loss").

    A release the store failed (a dead pooled connection, a timeout) is tried once more at
    once: the lease is then free for the next holder instead of held for its whole lifetime.
    That retry's "not held" means the first attempt was applied and its reply lost.

    Args:
        release: the release call (``True``: released, ``False``: not held by this holder).
        key: the primitive's key (for the log).
        event: the log event's prefix (``<event>_retried``, ``<event>_failed``).

    Returns:
        ``True`` released, ``False`` refused (not held: lapsed or taken over), ``None`` both
        attempts failed.
    """
    try:
        return release()
    except Exception as exc:
        log.warning("event=%s_retried key=%s error=%s", event, key, exc)
    try:
        release()
        return True
    except Exception as exc:
        log.warning("event=%s_failed key=%s error=%s", event, key, exc)
        return None


def release_parked(storage: Storage, hold: ParkedHold, *, event: str = "release") -> None:
    """Release a hold a park kept (a lock by its owner, a semaphore lease by its holder)
    with :func:`release_quietly`; never raises."""
    primitive = storage.locks if hold.primitive == "lock" else storage.semaphores
    release_quietly(lambda: primitive.release(hold.key, hold.holder), hold.key, event=event)



def refused_loss(held: list[Held]) -> LockLost | None:
    """The loss a refused release revealed: a :class:`~reactor.errors.LockLost` for the first
    of ``held`` whose release answered "not held", or ``None`` when every release was honoured.
    """
    for hold in held:
        if hold.refused:
            primitive = "lock" if isinstance(hold.client, Lock) else "semaphore"
            return LockLost(
                f"{primitive} {hold.key!r} was no longer held at release: it lapsed or changed "
                "hands while the step ran", key=hold.key, primitive=primitive,
            )
    return None
