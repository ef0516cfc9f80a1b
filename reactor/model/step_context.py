"""``StepContext``: the read-only view of the run that a step body receives.

Function steps get it as their ``ctx`` argument; class steps read it as ``self.context``
(docs/concepts.md, "Reactors and steps"). It exposes identities and the
results so far, never the engine's mutable state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from reactor.errors import DeserializationError, LockLost
from reactor.model.heartbeats import Heartbeats, LastHeartbeat
from reactor.model.run_records import MapMembership

__all__ = ["Hold", "StepContext"]


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


def _never_lost() -> LockLost | None:
    return None


@dataclass(frozen=True)
class Hold:
    """One coordination hold a step body runs under (``docs/coordination.md``, "Holds").

    Attributes:
        primitive: ``"lock"``, ``"semaphore"`` or ``"ordered_lock"``.
        key: the primitive's key.
        scope: ``"reactor"`` (declared on the reactor, held for the whole run) or ``"step"``.
        fencing_token: for a lock, the token of this hold: greater than the token of every
            earlier hold of the key (pass it to the resource you protect); else ``None``.
        ordered_ticket: for an ordered lock, ``(epoch, nonce)`` — the turn's fencing token,
            compared as a tuple; else ``None``.
    """

    primitive: Literal["lock", "semaphore", "ordered_lock"]
    key: str
    scope: Literal["reactor", "step"]
    fencing_token: int | None = None
    ordered_ticket: tuple[int, int] | None = None
    probe: Callable[[], LockLost | None] = field(
        default=_never_lost, repr=False, compare=False
    )

    @property
    def lost(self) -> LockLost | None:
        """The :class:`~reactor.errors.LockLost` once the hold is gone, else ``None``.

        No I/O: reads what the renewer knows (a refused extend, or the lease deadline passed).
        """
        return self.probe()


@dataclass(frozen=True)
class StepContext:
    """What a step body may know about its run.

    Attributes:
        run_id: the id of the run executing the step (a map element's or composed child's own
            id inside those).
        reactor: the registered name of the reactor the step belongs to.
        step: the step's name.
        attempt: the attempt number (1-based) of ``run``; ``0`` in ``undo``/``compensate``.
        root_run_id: the top-level run's id.
        parent_run_id: the parent run's id (map elements, composed children), else ``None``.
        map_metadata: for a map element: ``{"map_step", "map_id", "index", "parent_reactor"}``
            (read-only; the stored form of :attr:`map_membership`); else ``None``.
        results: the results of the steps completed so far (read-only).
        reactor_inputs: the run's validated inputs (read-only; includes redacted ones).
        holds: the locks, semaphore leases and ordered-lock turns the body runs under,
            reactor-level first (``docs/coordination.md``, "Holds").
        transaction: in the ``run`` and ``undo`` of a step declared ``transaction=True``: the
            storage's connection, inside the transaction that also writes the step's
            checkpoint (PostgreSQL: a ``psycopg.Connection``). Write through it and never
            commit or roll it back yourself (docs/concepts.md, "Transactional steps").
            ``None`` otherwise.
        map_membership: for a map element, the typed
            :class:`~reactor.model.run_records.MapMembership` (map step, map id, index, parent
            reactor: docs/concepts.md, "Inline map"); else ``None``. Give either this or
            :attr:`map_metadata`: the other is derived from it (a partial hand-built
            ``map_metadata`` derives no membership).
        last_heartbeat: in ``run``: the last heartbeat an earlier attempt of the step made
            (its ``details``, ``at`` and ``attempt``; docs/concepts.md, "Heartbeats"), or
            ``None``.
        heartbeats: the engine's record of the step's heartbeats (:meth:`heartbeat` writes
            it); ``None`` outside a step's ``run``.
    """

    run_id: str
    reactor: str
    step: str
    attempt: int = 0
    root_run_id: str | None = None
    parent_run_id: str | None = None
    map_metadata: Mapping[str, Any] | None = None
    results: Mapping[str, Any] = field(default_factory=_empty)
    reactor_inputs: Mapping[str, Any] = field(default_factory=_empty)
    holds: tuple[Hold, ...] = ()
    transaction: Any = None
    map_membership: MapMembership | None = None
    last_heartbeat: LastHeartbeat | None = None
    heartbeats: Heartbeats | None = field(default=None, compare=False, repr=False)

    def heartbeat(self, details: Any = None) -> None:
        """Say the body is alive, with its progress (docs/concepts.md, "Heartbeats").

        Cheap: kept in memory, no I/O (the object itself: change a progress dict after the
        call and the next attempt reads the change). A call from an attempt that timed out
        and runs on is ignored. A step declared ``Timeouts(heartbeat=...)`` fails its
        attempt with ``StepTimeout`` when its body goes that long without a call; the next
        attempt reads the last ``details`` as :attr:`last_heartbeat`. Outside a step's
        ``run`` (an ``undo``, a ``compensate``, ``Step.call``) it does nothing.

        Args:
            details: the progress to resume from (a value the codec can store, e.g. an
                offset or a cursor); ``None``: none.
        """
        if self.heartbeats is not None:
            self.heartbeats.beat(details, self.attempt)

    def __post_init__(self) -> None:
        if self.map_membership is not None and self.map_metadata is None:
            object.__setattr__(self, "map_metadata", self.map_membership.as_mapping())
        elif self.map_membership is None and self.map_metadata is not None:
            try:
                membership = MapMembership.from_stored(self.map_metadata)
            except DeserializationError:
                return
            object.__setattr__(self, "map_membership", membership)

    @property
    def hold_lost(self) -> bool:
        """Whether any hold of :attr:`holds` is lost (no I/O; cheap enough for a tight loop)."""
        return any(hold.lost is not None for hold in self.holds)

    def raise_if_lost(self) -> None:
        """Raise when a hold is lost, so long work stops before it acts without exclusion.

        Raises:
            LockLost: the first lost hold's error (the step then fails with it and is
                compensated, like any failure whose body started).
        """
        for hold in self.holds:
            lost = hold.lost
            if lost is not None:
                raise lost

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of the lock the step runs under (step-level first, else the
        reactor's), or ``None`` without a lock (``docs/coordination.md``, "Fencing tokens")."""
        for scope in ("step", "reactor"):
            for hold in self.holds:
                if hold.scope == scope and hold.fencing_token is not None:
                    return hold.fencing_token
        return None

    @property
    def ordered_ticket(self) -> tuple[int, int] | None:
        """``(epoch, nonce)`` of the ordered-lock turn the step runs under (step-level first),
        the ordered lock's fencing token; ``None`` without one."""
        for scope in ("step", "reactor"):
            for hold in self.holds:
                if hold.scope == scope and hold.ordered_ticket is not None:
                    return hold.ordered_ticket
        return None

    @property
    def element_index(self) -> int | None:
        """The map element's 0-based index, or ``None`` outside a map element."""
        if self.map_membership is not None:
            return self.map_membership.index
        return MapMembership.index_in(self.map_metadata)
