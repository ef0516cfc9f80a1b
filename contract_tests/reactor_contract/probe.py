"""The probe: a concept-level backdoor into an adapter, so expiry is tested without sleeping.

The contract suite never waits for a TTL to lapse (a MongoDB TTL monitor runs once a minute,
DynamoDB deletes "within days"). Instead every adapter ships a :class:`Probe` that can read a
record's remaining TTL, make it lapse *now* (or in a few seconds), and read its raw stored
form, all **without** going through the sub-store under test (the zarr ``StoreTests`` backdoor
idea; ruby_reactor's ``CoordinationProbe``; docs/contract-suite.md, "The probe").

Probes are addressed by *concern* and *key*, not by backend key layout, so one test works on
every adapter:

============== ===================================== ==========================================
concern        key                                   member
============== ===================================== ==========================================
context        context id                            —
step_result    ``"<context_id>:<step_name>"``        —
map            map id (every forward aggregate)      optional aggregate name
map_rollback   map id (every rollback aggregate)     optional aggregate name
idempotency    ``"<reactor>:<key>"``                 —
correlation    correlation id                        —
interrupt      ``"<context_id>:<step_path>"``        ``"attempts"`` for the attempt counter
lock           lock key                              ``"fence"``: the whole record (see below)
semaphore      semaphore key                         holder token (expire one lease)
rate_limit     rate-limit key (every window bucket)  —
period         period key                            —
ordered_lock   ordered-lock key                      nonce (``str``): make that timer dead;
                                                     a field name; ``"fence"`` (see below)
============== ===================================== ==========================================

A lapsed or released lock, and a lapsed or reset ordered lock, stay stored for
``FENCE_RETENTION`` seconds so the next acquisition or batch still sees the last fencing token
or epoch (docs/coordination.md#fencing-tokens); ``expire`` without a member lapses the lock
but keeps that record, exactly like a real lapse. The member :data:`FENCE` stands for the whole
record, retained fence included: expiring it is the garbage collection that follows the
retention, after which only the storage clock orders the next token.

Adapters publish a probe factory ``probe_for(storage) -> Probe`` in the entry-point group
``reactor.probes``, keyed by the storage URL scheme; routers publish
``router_probe_for(router) -> RouterProbe`` in ``reactor.router_probes``
(docs/contract-suite.md).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Protocol, cast, runtime_checkable
from urllib.parse import urlsplit

from reactor.ports.documents import DocumentStore
from reactor.ports.router import Router
from reactor.ports.storage import Storage

__all__ = [
    "CONCERNS",
    "FENCE",
    "PROBE_GROUP",
    "ROUTER_PROBE_GROUP",
    "CleanupProbe",
    "ClockProbe",
    "DocumentsClockProbe",
    "DriverProbe",
    "Probe",
    "ProbeNotFound",
    "RouterProbe",
    "UnsupportedBody",
    "load_probe",
    "load_router_probe",
]

#: Every concern a :class:`Probe` must understand.
CONCERNS: frozenset[str] = frozenset(
    {
        "context",
        "step_result",
        "map",
        "map_rollback",
        "idempotency",
        "correlation",
        "interrupt",
        "lock",
        "semaphore",
        "rate_limit",
        "period",
        "ordered_lock",
    }
)

#: The probe member of ``lock`` and ``ordered_lock`` naming the whole stored record, its retained
#: fencing token or epoch included (docs/coordination.md#fencing-tokens).
FENCE = "fence"

#: Entry-point group of storage probe factories, keyed by URL scheme.
PROBE_GROUP = "reactor.probes"
#: Entry-point group of router probe factories, keyed by URL scheme.
ROUTER_PROBE_GROUP = "reactor.router_probes"


@runtime_checkable
class Probe(Protocol):
    """A backdoor into one storage adapter (see the module docstring for concerns and keys).

    A probe must not call the sub-store it inspects: it reads and rewrites the backend's records
    directly (or through a lower layer such as a :class:`reactor.ports.DocumentStore`), so the
    sub-store's own logic stays under test.
    """

    def raw(self, concern: str, key: str) -> object | None:
        """The stored form of a record (adapter-specific shape), ``None`` when nothing is stored.

        Args:
            concern: one of :data:`CONCERNS`.
            key: the record's key in that concern.

        Returns:
            Whatever the backend holds (for a document store: ``{name: document}``); ``None``
            when no record of the concern exists under ``key``, expired ones included only if
            still physically stored.
        """
        ...

    def ttl(self, concern: str, key: str, member: str | None = None) -> float | None:
        """Remaining lifetime in seconds on the storage clock.

        For concerns made of several records (``map``, ``rate_limit``, ...) this is the
        **smallest** remaining lifetime among them, unless ``member`` selects one.

        Returns:
            ``None`` when absent or logically expired; :data:`math.inf` when it never expires.

        Raises:
            KeyError: ``concern`` or ``member`` is unknown to this probe.
        """
        ...

    def expire(
        self, concern: str, key: str, member: str | None = None, *, after: float = 0.0
    ) -> None:
        """Make a record behave as if its TTL lapses ``after`` seconds from now.

        ``after=0`` (the default) makes it lapse now: every read treats it as absent and every
        conditional write may take it over. With ``member``: a semaphore holder's lease, an
        ordered-lock nonce's liveness timer (``after`` is then ignored: the timer is made dead),
        one aggregate of a multi-record concern, or :data:`FENCE` for a lock's or an ordered
        lock's whole record, retained fencing value included (its garbage collection).

        Raises:
            KeyError: ``concern`` or ``member`` is unknown to this probe.
        """
        ...


class UnsupportedBody(ValueError):
    """A router's transport cannot carry this raw body at all (SQS carries Unicode text only,
    so no producer can send it non-UTF-8 bytes); the poison tests skip that case."""


@runtime_checkable
class RouterProbe(Protocol):
    """A backdoor into one router, for the dead-letter (poison message) tests."""

    def inject_raw(self, body: str | bytes) -> None:
        """Put ``body`` on the queue as a message, due now, exactly as a foreign producer would.

        The body is not validated: the point is to inject messages a worker cannot decode
        (docs/contract-suite.md, "The probe").

        Args:
            body: text, or raw bytes that need not be UTF-8 (stored byte for byte where the
                transport is binary-safe).

        Raises:
            UnsupportedBody: the transport cannot carry ``body`` (e.g. non-UTF-8 bytes on a
                text-only queue).
        """
        ...


@runtime_checkable
class ClockProbe(Protocol):
    """An optional probe capability: the same stored records seen through an injected clock.

    Adapters whose clock is application-side (``Capabilities.clock == "application"``) can offer
    it, so the suite can run clients whose clocks disagree on one backend without sleeping
    (docs/coordination.md#clock-skew). A probe without it, or whose :meth:`with_clock` returns
    ``None``, makes the clock-skew tests skip with a reason in the conformance table.
    """

    def with_clock(self, clock: Callable[[], float]) -> Storage | None:
        """A second storage on the same records as the probed one, judging time by ``clock``.

        Args:
            clock: the new storage's clock, ``() -> epoch seconds``; it is read for every
                decision the storage makes (expiry, rate-limit buckets, lease deadlines).

        Returns:
            A storage of the same adapter sharing the probed storage's records (and namespace)
            whose ``now()`` is ``clock()``, or ``None`` when the adapter cannot inject a clock
            (it reads a server clock, or its records cannot be shared). The caller closes it;
            closing it leaves the probed storage usable.
        """
        ...


@runtime_checkable
class DocumentsClockProbe(Protocol):
    """An optional probe capability of a storage built on a ``DocumentStore`` whose storage
    clock is the server's: the same documents judged by an injected clock, for the
    ``documents`` concern only (docs/contract-suite.md, "The probe").

    A storage declaring ``Capabilities.clock == "server"`` must not follow a clock a client
    injects (its :meth:`ClockProbe.with_clock` returns ``None``), yet its document store may
    judge expiry against a ``now`` it is given: this twin of the document store, over the same
    rows, is then how the suite checks the expiry boundary exactly (``expires_at == now`` is
    expired) without the storage ever claiming a client clock.
    """

    def documents_with_clock(self, clock: Callable[[], float]) -> DocumentStore | None:
        """A second document store on the same rows whose ``now()`` is ``clock()``.

        Returns:
            The store (the caller closes it; closing it leaves the probed storage usable), or
            ``None`` when the adapter cannot.
        """
        ...


@runtime_checkable
class CleanupProbe(Protocol):
    """An optional probe capability: empty the namespace of the probed storage (router).

    The suite gives every test a namespace of its own (a ``?prefix=``); when the test ends it
    calls :meth:`purge_namespace` on the probe of every storage and router it opened, so a run
    leaves nothing behind (docs/contract-suite.md, "Cleanup: nothing left behind"). Storage
    probes and router probes offer it alike. A probe without it, or whose methods return
    ``None``, leaves the namespace as it is and the ``cleanup`` row shows a gap. In-process
    adapters, whose records die with the object, may return ``0`` and ``[]``.
    """

    def purge_namespace(self) -> int | None:
        """Delete everything stored under the probed object's namespace: every record of every
        concern, expired and retained ones (fence tombstones) included, and every backend
        object the namespace alone uses (a queue, a collection, an index entry). Nothing
        outside the namespace is touched, and a second call finds nothing to delete.

        Returns:
            How many records (keys, rows, items, collections or queues) were deleted, or
            ``None`` when this probe cannot purge.
        """
        ...

    def leftovers(self) -> list[str] | None:
        """The names of everything still stored under the namespace (expired and retained
        records included), e.g. ``["rc1a2b:lock:k"]``; ``[]`` after a purge.

        Returns:
            Backend names (keys, ``"collection/key"``, queue names), sorted, or ``None`` when
            this probe cannot tell.
        """
        ...


@runtime_checkable
class DriverProbe(Protocol):
    """An optional probe capability: name the driver clients the adapter sends its requests
    through, so the suite can inject faults at the driver (docs/contract-suite.md, "Faults
    injected at the driver"; :class:`reactor_contract.driver_faults.FaultInjector`).

    Storage probes and router probes offer it alike. A probe without it, or whose
    :meth:`driver_clients` returns ``None`` or ``[]`` (an in-process adapter has no driver),
    makes the ``driver_faults`` tests skip, and that row shows a gap.
    """

    def driver_clients(self) -> list[tuple[object, str]] | None:
        """Where the probed object keeps each driver client, as ``(owner, attribute)`` pairs:
        ``getattr(owner, attribute)`` is the client (a ``redis.Redis``/``RedisCluster``, a
        pymongo or mongomock ``MongoClient``, a boto3 client, a ``sqlite3.Connection``, a
        ``psycopg_pool.ConnectionPool``). The owner is the object the adapter reads the
        attribute from on every request: a ``sqlite3.Connection`` takes no attributes, so the
        injector replaces it there by a proxy while installed.

        Returns:
            The pairs, one per client (every client the adapter's requests go through), or
            ``None`` when the probe cannot name them.
        """
        ...


class ProbeNotFound(LookupError):
    """No probe factory is registered for a URL scheme in the named entry-point group."""


def _scheme(url: str) -> str:
    return urlsplit(url).scheme.lower()


def _factory(group: str, url: str) -> Callable[[Any], Any]:
    scheme = _scheme(url)
    found = [ep for ep in entry_points(group=group) if ep.name == scheme]
    if not found:
        known = sorted({ep.name for ep in entry_points(group=group)})
        raise ProbeNotFound(
            f"no probe registered for scheme {scheme!r} in entry-point group {group!r} "
            f"(registered: {', '.join(known) or 'none'}); see docs/contract-suite.md"
        )
    return cast(Callable[[Any], Any], found[0].load())


def load_probe(url: str, storage: Storage) -> Probe:
    """Build the probe of ``storage`` from the ``reactor.probes`` entry point of the URL scheme.

    Args:
        url: the storage URL the suite was given (only its scheme is used).
        storage: the storage object under test.

    Raises:
        ProbeNotFound: the scheme has no registered probe.
        TypeError: the factory returned something that is not a :class:`Probe`.
    """
    probe = _factory(PROBE_GROUP, url)(storage)
    if not isinstance(probe, Probe):
        raise TypeError(f"the {PROBE_GROUP} factory for {url!r} did not return a Probe")
    return probe


def load_router_probe(url: str, router: Router) -> RouterProbe:
    """Build the router probe of ``router`` through ``reactor.router_probes``.

    Raises:
        ProbeNotFound: the scheme has no registered router probe.
        TypeError: the factory returned something that is not a :class:`RouterProbe`.
    """
    probe = _factory(ROUTER_PROBE_GROUP, url)(router)
    if not isinstance(probe, RouterProbe):
        raise TypeError(f"the {ROUTER_PROBE_GROUP} factory for {url!r} did not return a probe")
    return probe
