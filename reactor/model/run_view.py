"""``RunView``: the read-only view of a stored run returned by ``Reactor.find``.

Secrets never appear (docs/security.md, "What each view shows"): a view is built from the
context as stored, without decrypting anything, and masked with
:mod:`reactor.model.masking` — inputs named in the stored ``redacted`` list and every sealed
value read ``"[REDACTED]"``, trace entries carry no arguments, and ``Failure.inputs`` is
masked too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reactor.model.context import Context
from reactor.model.engine_state import CancelRequest, PendingInterrupt
from reactor.model.masking import mask_value
from reactor.model.results import Failure
from reactor.model.status import RunStatus

__all__ = ["RunView", "TraceEntry"]


@dataclass(frozen=True)
class TraceEntry:
    """One execution trace entry.

    Attributes:
        type: ``run``, ``failed``, ``retry``, ``compensate``, ``compensate_failure``,
            ``undo``, ``undo_failure``, ``halt``, ``skipped``, ``paused`` or ``resumed``
            (an interrupt: docs/run-control.md, "Interrupts"), or ``cancelled`` (a cancel
            took effect: docs/run-control.md, "Cancel").
        step: the step name.
        at: epoch seconds (storage clock).
        attempt: the attempt number for ``run``/``failed``/``retry`` entries.
        detail: a short message (failure message, retry delay, halt reason...).
    """

    type: str
    step: str | None
    at: float
    attempt: int | None = None
    detail: str | None = None

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> TraceEntry:
        """Build from a stored trace dict (unknown keys are ignored)."""
        attempt = entry.get("attempt")
        detail = entry.get("detail")
        at = entry.get("at", 0.0)
        return cls(
            type=str(entry.get("type", "")),
            step=entry.get("step"),
            at=float(at) if isinstance(at, int | float) else 0.0,
            attempt=attempt if isinstance(attempt, int) else None,
            detail=str(detail) if detail is not None else None,
        )


@dataclass(frozen=True)
class RunView:
    """A stored run, as shown to users and the dashboard.

    Attributes:
        run_id: the run's id.
        reactor: the registered reactor name.
        status: the run status.
        inputs: the inputs, secrets shown as ``"[REDACTED]"``.
        results: step name -> value, for the steps completed so far.
        trace: the execution trace, oldest first.
        failure: the run's ``Failure`` (redacted inputs), if it failed.
        undo_stack: the names of the completed steps still on the undo stack, oldest first.
        current_step: the step in flight when the run stopped (aborted runs), if any.
        map_metadata: for a map element: ``{"map_step", "map_id", "index", "parent_reactor"}``.
        parent_run_id: the parent run's id, if any.
        root_run_id: the top-level run's id.
        created_at: epoch seconds.
        updated_at: epoch seconds.
        children: compose step name -> the embedded child run's view.
        idempotency_key: the idempotency key this run holds, if any (docs/run-control.md,
            "Idempotency keys").
        retried_from: the run this run retries (``Reactor.retry``), if any.
        retries: the runs started by ``Reactor.retry`` of this run, oldest first
            (docs/run-control.md, "Retrying a failed run").
        interrupt: for a ``paused`` run, the interrupt it waits at (step path, correlation
            id, timeout and deadline, attempts; docs/run-control.md, "Interrupts"); else
            ``None``.
        cancel: for a run cancelled (or being cancelled) by ``Reactor.cancel``, the request:
            its ``reason``, whether the work was rolled back (``rollback``) and when it was
            requested (``requested_at``, epoch seconds; docs/run-control.md, "Cancel"); else
            ``None``.
    """

    run_id: str
    reactor: str
    status: RunStatus
    inputs: Mapping[str, Any]
    results: Mapping[str, Any]
    trace: tuple[TraceEntry, ...] = ()
    failure: Failure | None = None
    undo_stack: tuple[str, ...] = ()
    current_step: str | None = None
    map_metadata: Mapping[str, Any] | None = None
    parent_run_id: str | None = None
    root_run_id: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    children: Mapping[str, RunView] = field(default_factory=dict)
    idempotency_key: str | None = None
    retried_from: str | None = None
    retries: tuple[str, ...] = ()
    interrupt: PendingInterrupt | None = None
    cancel: CancelRequest | None = None

    @classmethod
    def from_context(cls, ctx: Context) -> RunView:
        """Build the masked view of ``ctx`` (composed children become nested views in
        ``children``).

        Args:
            ctx: a context as loaded (sealed values and clear ones are both masked).

        Returns:
            The view; no secret of ``ctx`` appears in it.
        """
        children = {
            name: cls.from_context(value)
            for name, value in ctx.composed_contexts.items()
            if isinstance(value, Context)
        }
        links = ctx.engine_state.links
        return cls(
            run_id=ctx.context_id,
            reactor=ctx.reactor,
            status=ctx.status,
            inputs=ctx.redacted_inputs(),
            results={k: mask_value(v) for k, v in ctx.intermediate_results.items()},
            trace=tuple(TraceEntry.from_entry(e) for e in ctx.execution_trace),
            failure=ctx.failure.masked() if ctx.failure is not None else None,
            undo_stack=tuple(str(e.get("step")) for e in ctx.undo_stack),
            current_step=ctx.current_step,
            map_metadata=ctx.map_metadata,
            parent_run_id=ctx.parent_context_id,
            root_run_id=ctx.root_context_id,
            created_at=ctx.created_at,
            updated_at=ctx.updated_at,
            children=children,
            idempotency_key=links.idempotency_key,
            retried_from=links.retried_from,
            retries=links.retries,
            interrupt=ctx.engine_state.interrupt,
            cancel=ctx.engine_state.cancel,
        )
