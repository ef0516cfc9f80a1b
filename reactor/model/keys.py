"""Names of the liveness locks and claims shared by the engine, the handlers and the sweepers.

A unit of work holds its liveness lock while it runs; a sweeper treats a unit whose record says
"in flight" and whose lock is gone as lost. Both sides must agree on the names, so they live here
(docs/architecture.md, "Liveness locks and keys").
"""

from __future__ import annotations

import uuid

__all__ = [
    "CANCEL_CLAIM_PATH",
    "CHILD_ID_NAMESPACE",
    "FIRST_SUSPEND_CLAIM_PATH",
    "child_run_id",
    "map_collect_key",
    "map_element_key",
    "reactor_suspension_key",
    "run_completion_channel",
    "run_liveness_key",
    "step_completion_channel",
    "step_liveness_key",
    "suspend_claim_path",
    "sweep_dispatch_key",
    "sweep_episode_key",
    "sweep_window_key",
]


#: The reserved step path of a root run's cancel request in the claims store
#: (``ClaimStore.interrupt_resumes(root run id, [CANCEL_CLAIM_PATH])``; docs/run-control.md,
#: "Cancel"): :mod:`reactor.engine.run_control.cancel` records and carries it out, a fan-out
#: map's dispatcher reads it before each batch.
CANCEL_CLAIM_PATH = "@cancel"


def suspend_claim_path(generation: int) -> str:
    """The reserved claim path of a run's suspend request (docs/operations.md, "Suspend and
    unsuspend"): ``@suspend.<generation>``, ``generation`` the times the run was unsuspended
    (claims are first-writer-wins and never cleared, so each suspension has a path of its
    own)."""
    return f"@suspend.{generation}"


def reactor_suspension_key(reactor: str) -> str:
    """The lock that is a reactor's suspend switch (docs/operations.md, "Suspend and
    unsuspend"): ``@suspended_reactor:<reactor>``, held with no expiry by an owner whose text
    is the switch's :class:`~reactor.model.engine_state.Suspension` (its ``encode()``) while
    the reactor's runs are held, released when they are let go.

    Args:
        reactor: the registered reactor name.

    Returns:
        A :class:`reactor.ports.LockStore` key.
    """
    return f"@suspended_reactor:{reactor}"


#: The suspend claim path of a run never unsuspended (read with a worker's load of the run).
FIRST_SUSPEND_CLAIM_PATH = suspend_claim_path(0)

#: The UUID5 namespace of :func:`child_run_id` (fixed: a stored parent must find its child
#: again after an upgrade).
CHILD_ID_NAMESPACE = uuid.UUID("6f1c2a4e-3d1b-5b8e-9a57-0c4b1e2d7a90")


def child_run_id(parent_id: str, step: str) -> str:
    """The run id of the ``async_reactor`` child that step ``step`` of run ``parent_id``
    starts (deterministic: docs/run-control.md, "async_reactor"): the parent executed again
    finds it, and a cancel of the parent finds it to cancel it too.

    Args:
        parent_id: the context id owning the ``async_reactor`` step.
        step: the step's name.

    Returns:
        A UUID5 string.
    """
    return str(uuid.uuid5(CHILD_ID_NAMESPACE, f"{parent_id}:{step}"))


def run_liveness_key(context_id: str) -> str:
    """The liveness lock of a running root or ``async_reactor`` child (``async:<id>``)."""
    return f"async:{context_id}"


def step_liveness_key(step_context_id: str, step_name: str) -> str:
    """The liveness lock of an ``async_step`` unit (``async_step:<ctx>:<step>``)."""
    return f"async_step:{step_context_id}:{step_name}"


def map_element_key(map_id: str, index: int) -> str:
    """The liveness lock of a map element job and of its rollback job."""
    return f"map_element:{map_id}:{index}"


def map_collect_key(map_id: str) -> str:
    """The lock serialising a map's collector."""
    return f"map_collect:{map_id}"


def sweep_window_key(window: int) -> str:
    """The never-released claim on sweep tick ``window`` (``floor(now / interval)``)."""
    return f"sweeper:window:{window}"


def sweep_dispatch_key(unit: str) -> str:
    """The period marker a sweeper takes before it re-enqueues ``unit`` (its dispatch lease).

    ``unit`` names what is re-dispatched, e.g. ``run:<id>``, ``step:<ctx>:<step>``,
    ``map_element:<map>:<index>`` (docs/workers.md, "Sweep cursors and dispatch leases").
    While the marker lives, no sweeper re-enqueues the same unit again.

    Returns:
        ``sweeper:dispatch:<unit>`` (a :class:`reactor.ports.PeriodStore` key).
    """
    return f"sweeper:dispatch:{unit}"


def sweep_episode_key(unit: str) -> str:
    """The period marker recording when sweepers first re-dispatched ``unit`` lately; the
    dispatch lease grows with the time since (docs/workers.md, "Sweep cursors and dispatch
    leases").

    Returns:
        ``sweeper:episode:<unit>`` (a :class:`reactor.ports.PeriodStore` key).
    """
    return f"sweeper:episode:{unit}"


def run_completion_channel(context_id: str) -> str:
    """The signal channel a run publishes on once its terminal state is saved
    (``run:<id>:done``; durable record first, then publish: docs/architecture.md, "Execution
    invariants")."""
    return f"run:{context_id}:done"


def step_completion_channel(step_context_id: str, step_name: str) -> str:
    """The signal channel an ``async_step`` unit publishes on once its terminal Step Result
    Record is written (``async_step:<ctx>:<step>:done``; docs/protocol.md#signals)."""
    return f"async_step:{step_context_id}:{step_name}:done"
