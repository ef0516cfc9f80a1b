"""``RunState``: the mutable state of one executing context, shared by the engine modules."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from reactor.dsl.definition import ReactorDefinition
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.env import Env
from reactor.errors import LockLost
from reactor.model.context import Context
from reactor.model.engine_state import KeyedTicket
from reactor.model.heartbeats import Heartbeats, LastHeartbeat
from reactor.model.results import Failure, Paused, Success
from reactor.model.run_records import TraceRecord
from reactor.model.status import RunStatus
from reactor.model.step_context import Hold, StepContext
from reactor.ports.capabilities import StepTransaction

__all__ = ["Execute", "Executor", "InFlight", "KeptTransaction", "RunState"]


@dataclass
class KeptTransaction:
    """A succeeded transactional step's open transaction, kept for its checkpoint.

    Attributes:
        transaction: the storage's transaction.
        binding: leaves the transaction's binding to the executing thread (entered when the
            body returned).
    """

    transaction: StepTransaction
    binding: ExitStack


@dataclass
class InFlight:
    """The step being executed (so an interruption knows what to compensate later).

    Attributes:
        step: the step name.
        kind: ``"step"``, ``"compose"`` or ``"map"``.
        arguments: the resolved (and, once validated, validated) arguments.
        body_started: whether user work started (a leaf's body, a child or an element run).
    """

    step: str
    kind: str
    arguments: dict[str, Any] = field(default_factory=dict)
    body_started: bool = False


@dataclass
class RunState:
    """One context being executed or rolled back.

    Attributes:
        definition: the reactor's definition.
        ctx: the context.
        env: the execution environment.
        checkpoint: saves the record holding ``ctx`` (its own, or its compose parent's).
        in_flight: the step in flight, if any.
        hand_off: root runs with ``background after:/before:`` in the caller only: called by
            the executor as ``hand_off(state, "before", step)`` when ``step`` is about to run
            and ``hand_off(state, "after", step)`` once it is recorded; it raises to hand the
            run off (:mod:`reactor.engine.background`). ``None`` everywhere else.
        retry_wait: root runs inside a worker only: waits before a step retry instead of
            ``env.sleep`` (it raises to re-enqueue the run with the delay; docs/concepts.md,
            "Retries"). ``None``: sleep in-thread.
        coordination_owner: the lock owner of step-level coordination; ``None`` = the root
            context id. An ``async_step`` unit's job uses its derived per-unit owner
            (``async_step:<ctx>:<step>``).
        holds: the reactor-level holds the run executes under (its own and, in a composed
            child, its parents'); every step's result is checked against them before it is
            recorded (``docs/coordination.md``, "Renewal and loss").
        step_holds: the step-level holds of the step attempt running now.
        on_ordered_ticket: called as ``on_ordered_ticket(step, ticket)`` when a step-level
            ordered-lock ticket (a :class:`~reactor.model.engine_state.KeyedTicket`) is newly
            assigned, before the
            step may run under it; an ``async_step`` unit persists it on its record there, so
            a unit recovered after a crash keeps its place in line (``docs/coordination.md``,
            "Ordered locks in workers"). ``None``: the ticket lives in the context only.
        path_prefix: what this context's step names are prefixed with to make the step paths
            of its interrupts: ``""`` for a root run, ``"<compose step>."`` for a composed
            child (nested children add their own; docs/run-control.md, "Interrupts").
        suspend_claim: the text of the run's suspend request, once a claims read (with a
            cancel check, or a checkpoint's) found one (docs/operations.md, "Suspend and
            unsuspend"); the run suspends before its next step.
        cancel_checked_at: the runtime clock's ``monotonic()`` when this execution last read
            its cancel request (or started): the next boundary reads it again only
            ``cancel_check_interval`` seconds later (docs/run-control.md, "Cancel").
        claims_read: the run's claims the store read with the load that started this
            execution (``{step_path: payload}``; its cancel request), ``None`` when none were
            read with it: the start of the execution reads the cancel request itself.
        step_transaction: the open transaction of a transactional step whose body succeeded
            and whose checkpoint is not written yet, bound to the executing thread
            (:mod:`reactor.engine.step_transactions`).
    """

    definition: ReactorDefinition
    ctx: Context
    env: Env
    checkpoint: Checkpointer
    in_flight: InFlight | None = None
    hand_off: Callable[[RunState, str, str], None] | None = None
    retry_wait: Callable[[float], None] | None = None
    coordination_owner: str | None = None
    holds: tuple[Hold, ...] = ()
    step_holds: tuple[Hold, ...] = ()
    on_ordered_ticket: Callable[[str, KeyedTicket], None] | None = None
    path_prefix: str = ""
    cancel_checked_at: float | None = None
    suspend_claim: str | None = None
    claims_read: dict[str, str] | None = None
    step_transaction: KeptTransaction | None = None

    def lost_hold(self) -> LockLost | None:
        """The first reactor-level hold that is lost, else ``None`` (no I/O)."""
        for hold in self.holds:
            lost = hold.lost
            if lost is not None:
                return lost
        return None

    def now(self) -> float:
        """Epoch seconds on the storage clock."""
        return self.env.now()

    def trace(self, type_: str, step: str | None, **extra: Any) -> None:
        """Append an execution trace entry (never holds step arguments: no secret leaks)."""
        self.ctx.execution_trace.append(TraceRecord.of(type_, step, self.now(), **extra))

    def mark_paused(self, step: str, event: str, detail: str) -> bool:
        """Mark the run ``paused`` at ``step`` (no step in flight, no current step) and trace
        ``event`` (``"paused"`` at an interrupt, ``"sleeping"`` at a sleep; docs/run-control.md,
        "Interrupts"; docs/schedules.md, "Durable sleep").

        Args:
            step: the step (of this context) the run stops at.
            event: the trace entry's type.
            detail: its detail (the pausing step's path from the root).

        Returns:
            Whether this context is the one the checkpointer saves (the root): ``False`` for a
            composed child, whose root pauses in turn.
        """
        ctx = self.ctx
        self.in_flight = None
        ctx.current_step = None
        ctx.status = RunStatus.PAUSED
        self.trace(event, step, detail=detail)
        return self.checkpoint.context is ctx

    def step_context(
        self, step: str, attempt: int = 0, transaction: StepTransaction | None = None,
        *, heartbeats: Heartbeats | None = None, last_heartbeat: LastHeartbeat | None = None,
    ) -> StepContext:
        """The read-only :class:`StepContext` handed to user code for ``step`` (with the
        connection of ``transaction``, a transactional step's, as ``ctx.transaction``; in a
        ``run``, the step's ``heartbeats`` and the ``last_heartbeat`` before this attempt:
        docs/concepts.md, "Heartbeats")."""
        ctx = self.ctx
        return StepContext(
            run_id=ctx.context_id,
            reactor=ctx.reactor,
            step=step,
            attempt=attempt,
            root_run_id=ctx.root_context_id or ctx.context_id,
            parent_run_id=ctx.parent_context_id,
            map_membership=ctx.map_metadata,
            results=MappingProxyType(ctx.intermediate_results),
            reactor_inputs=MappingProxyType(ctx.inputs),
            holds=self.holds + self.step_holds,
            transaction=None if transaction is None else transaction.connection,
            last_heartbeat=last_heartbeat,
            heartbeats=heartbeats,
        )


#: Runs every remaining step of a context and returns the run's result (``Paused`` when it
#: stopped at an interrupt: docs/run-control.md, "Interrupts"): the signature of
#: :func:`reactor.engine.executor.execute`, passed down to the code that starts a run of its
#: own from inside the executor (an inline map element, docs/concepts.md, "Inline map").
Execute = Callable[[RunState], Success | Failure | Paused]


@dataclass(frozen=True)
class Executor:
    """The executor's entry points, handed by :mod:`reactor.engine.executor` to a step kind
    that drives a nested execution (a composed child, docs/concepts.md, "Compose"), so that
    step kind calls back into the executor without importing it (docs/architecture.md,
    "Layers").

    Attributes:
        execute: runs every remaining step of a context
            (:func:`reactor.engine.executor.execute`).
        conclude_failure: finishes a recorded rollback and stores the context ``failed``
            (:func:`reactor.engine.executor.conclude_failure`).
        abort: stores a context ``aborted`` after an interruption
            (:func:`reactor.engine.executor.abort`).
    """

    execute: Execute
    conclude_failure: Callable[[RunState], Failure]
    abort: Callable[[RunState, BaseException], None]
