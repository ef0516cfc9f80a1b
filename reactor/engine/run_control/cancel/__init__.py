"""Cancelling a run where it executes: the cancel request, noticing it at a step boundary, and
carrying it out (docs/run-control.md, "Cancel").

**The request.** ``Reactor.cancel`` (:mod:`reactor.engine.run_control.cancel_run`) records a
:class:`~reactor.model.engine_state.CancelRequest` (``reason``, ``rollback``,
``requested_at``) as a first-writer-wins claim of the root run in the claims store, under the
reserved step path :data:`CANCEL_CLAIM_PATH` (``ClaimStore.claim_interrupt_resume``: one Lua
script on Redis, a conditional write on the document stores; no interrupt step can have this
path, a step name being an identifier). The claim is durable and atomic on every backend, and
the first request wins: a second cancel finds it and changes nothing.

**Noticing it.** An executing root run reads the claim with one
``ClaimStore.interrupt_resumes`` request:

* :func:`at_start`: whenever an execution continues a stored run (any worker's ``run`` job,
  including one the run sweeper re-dispatched after the owning worker died; an inline
  resume), before it takes its reactor-level coordination and before any further step;
* :func:`at_boundary`: after each step's body returned a ``Success`` (or reached an
  interrupt), before its result is recorded. A step that failed or halted ends the run as it
  would have (a failure rolls back, a halt keeps the progress).

Composed children and map elements are not checked: their root is, at its own boundaries.
An ``async_reactor`` child is a run of its own and checks its own request; a cancel of its
parent passes the request down to it (:func:`hold_for_child`) and waits for it to end.

**Carrying it out** (:func:`stop`, then :func:`conclude`). The request is kept on the run
(``EngineState.cancel``, saved with the rollback intent so a crash resumes the cancel, never
the run). With ``rollback=True`` the step in flight is compensated when its body started (the
step whose boundary noticed the cancel, a composed child or a map cut off, a leaf step
waiting for a retry), then every completed step is undone once, newest first, as after a
failure (:mod:`reactor.engine.rollback`; a fan-out map's elements through
:mod:`reactor.engine.maps.rollback`). With ``rollback=False`` nothing is rolled back: a step
that completed at the boundary is recorded, the undo stack is kept (``Reactor.undo`` rolls it
back later). Either way the holds the run keeps on its record are released (parked locks and
semaphore leases; ordered-lock tickets are advanced without poisoning a strict chain), a
paused run's correlation id is freed, and the run is stored ``cancelled`` with a ``Failure``
of :class:`~reactor.errors.RunCancelledError` carrying the reason and the rollback failures.
A fan-out map in flight stops dispatching (its pending elements skip themselves); while
elements still run, the run waits for the map to settle (:func:`hold_for_map`) and its
resumed execution rolls the elements back.
"""

from __future__ import annotations

from reactor.engine.run_control.cancel.conclusion import conclude, stop
from reactor.engine.run_control.cancel.in_flight import (
    HolderCheckpointer,
    cancel_stored,
    hold_for_child,
    hold_for_map,
    stored_in_flight,
)
from reactor.engine.run_control.cancel.notice import (
    at_boundary,
    at_start,
    before_step,
    stop_at_boundary,
)
from reactor.engine.run_control.cancel.requests import (
    cancelled_failure,
    claim,
    is_root,
    requested,
)
from reactor.model.keys import CANCEL_CLAIM_PATH

__all__ = [
    "CANCEL_CLAIM_PATH",
    "HolderCheckpointer",
    "at_boundary",
    "at_start",
    "before_step",
    "cancel_stored",
    "cancelled_failure",
    "claim",
    "conclude",
    "hold_for_child",
    "hold_for_map",
    "is_root",
    "requested",
    "stop",
    "stop_at_boundary",
    "stored_in_flight",
]
