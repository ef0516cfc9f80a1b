"""Workers announcing the definitions they can run (docs/deploys.md, "Routing by version").

A started :class:`~reactor.jobs.worker.Worker` announces, for every reactor registered in its
process, the fingerprint of its definition (:func:`reactor.dsl.fingerprint.definition_id`).
An announcement is a lease in the storage's semaphore store (no new storage operation, so
every backend has it): key ``deploys:<reactor>:<fingerprint>``, holder the worker's id, a
limit no deploy reaches (:data:`ANNOUNCE_LIMIT`), lease :data:`ANNOUNCE_LEASE` seconds. The
worker's :class:`Announcer` renews it every third of the lease and withdraws it when the
worker stops; a worker that dies stops renewing and its announcement lapses with the lease.

Each renewal is also the moment the worker looks for runs held ``needs_version`` that its
definitions can continue, and resumes them (the worker passes
:func:`reactor.jobs.version_routing.resume_held` as ``on_renew``), so a rolling deploy in
either direction needs no operator.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Final

from reactor import registry
from reactor.config import Runtime
from reactor.dsl.fingerprint import definition_id
from reactor.model.text import escaping_logger
from reactor.ports.storage import Storage

__all__ = [
    "ANNOUNCE_LEASE",
    "ANNOUNCE_LIMIT",
    "Announcer",
    "announce",
    "announce_key",
    "announced",
    "registered_fingerprints",
    "withdraw",
]

log = escaping_logger("reactor.deploys")

#: Seconds an announcement lives without a renewal (a dead worker's lapses after this).
ANNOUNCE_LEASE: Final = 30.0
#: The semaphore limit of an announcement key: more live workers than any deploy runs.
ANNOUNCE_LIMIT: Final = 1_000_000


def announce_key(reactor: str, fingerprint: str) -> str:
    """The semaphore key workers announce ``reactor``'s definition ``fingerprint`` under:
    ``deploys:<reactor>:<fingerprint>``.

    Args:
        reactor: a registered reactor name.
        fingerprint: 16 hex digits (docs/deploys.md, "Fingerprints").
    """
    return f"deploys:{reactor}:{fingerprint}"


def registered_fingerprints() -> dict[str, str]:
    """The fingerprint of every reactor registered in this process, by name."""
    return {name: definition_id(registry.get(name).definition).fingerprint
            for name in registry.names()}


def announce(storage: Storage, worker_id: str, fingerprints: Mapping[str, str],
             lease: float = ANNOUNCE_LEASE) -> None:
    """Announce (or renew) that worker ``worker_id`` runs these definitions for ``lease``
    seconds.

    Args:
        storage: the runtime's storage.
        worker_id: the worker's id (a semaphore holder).
        fingerprints: reactor name -> fingerprint.
        lease: seconds, > 0.

    Raises:
        StorageError: the backend failed.
    """
    for reactor, fingerprint in fingerprints.items():
        storage.semaphores.acquire(announce_key(reactor, fingerprint), worker_id,
                                   ANNOUNCE_LIMIT, lease)


def withdraw(storage: Storage, worker_id: str, fingerprints: Mapping[str, str]) -> None:
    """Withdraw worker ``worker_id``'s announcements (a worker that stops).

    Raises:
        StorageError: the backend failed.
    """
    for reactor, fingerprint in fingerprints.items():
        storage.semaphores.release(announce_key(reactor, fingerprint), worker_id)


def announced(storage: Storage, reactor: str, fingerprint: str) -> bool:
    """Whether a live worker announces ``reactor``'s definition ``fingerprint`` (its lease
    unexpired on the storage's clock).

    Raises:
        StorageError: the backend failed.
    """
    state = storage.semaphores.state(announce_key(reactor, fingerprint))
    return state is not None and bool(state.holders)


class Announcer:
    """A worker's announcement, renewed on a thread of its own (see the module docstring).

    Args:
        runtime: the worker's runtime.
        lease: seconds an announcement lives without renewal (renewed every ``lease / 3``).
        on_renew: called with the runtime after each successful announcement (at start and
            at every renewal); the worker resumes the ``needs_version`` runs it can continue
            there (docs/deploys.md, "Routing by version"). Anything it raises is logged
            (``event=resume_held_failed``) and the renewals go on.

    Attributes:
        worker_id: this worker's id (``host:pid:random``), the announcements' holder.
        fingerprints: what it announces: reactor name -> fingerprint (the registered
            reactors when :meth:`start` ran).
    """

    def __init__(self, runtime: Runtime, *, lease: float = ANNOUNCE_LEASE,
                 on_renew: Callable[[Runtime], object] | None = None) -> None:
        if lease <= 0:
            raise ValueError(f"lease must be > 0 seconds, got {lease!r}")
        self.runtime = runtime
        self.lease = lease
        self.on_renew = on_renew
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.fingerprints: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._announced = False

    def start(self) -> Announcer:
        """Announce now and keep renewing on a daemon thread until :meth:`stop`; a failed
        announcement is logged and tried again at the next renewal (never raised). The first
        one that succeeds logs ``event=announced worker=... reactors=... lease=...`` at INFO
        on the ``reactor.deploys`` logger."""
        self.fingerprints = registered_fingerprints()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="reactor-announcer",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop renewing and withdraw the announcements (best effort: a failure is logged;
        the lease then lapses on its own).

        Args:
            timeout: seconds to wait for the renewal thread.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        try:
            withdraw(self.runtime.storage, self.worker_id, self.fingerprints)
        except Exception as exc:
            log.warning("event=announce_withdraw_failed worker=%s error=%s",
                        self.worker_id, exc)

    def renew(self) -> None:
        """One renewal: announce, then call ``on_renew``. Failures are logged, never
        raised."""
        try:
            announce(self.runtime.storage, self.worker_id, self.fingerprints, self.lease)
        except Exception as exc:
            log.warning("event=announce_failed worker=%s error=%s", self.worker_id, exc)
            return
        if not self._announced:
            self._announced = True
            log.info("event=announced worker=%s reactors=%d lease=%.1f", self.worker_id,
                     len(self.fingerprints), self.lease)
        if self.on_renew is None:
            return
        try:
            self.on_renew(self.runtime)
        except Exception as exc:  # never ends the renewals: the announcement must stay live
            log.warning("event=resume_held_failed worker=%s error=%s: %s", self.worker_id,
                        type(exc).__name__, exc)

    def _loop(self) -> None:
        self.renew()
        while not self._stop.wait(self.lease / 3.0):
            self.renew()
