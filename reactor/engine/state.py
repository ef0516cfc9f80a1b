"""``RunState``: the mutable state of one executing context, shared by the engine modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from reactor.dsl.definition import ReactorDefinition
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.env import Env
from reactor.model.context import Context
from reactor.model.step_context import StepContext

__all__ = ["InFlight", "RunState"]


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
    """

    definition: ReactorDefinition
    ctx: Context
    env: Env
    checkpoint: Checkpointer
    in_flight: InFlight | None = None

    def now(self) -> float:
        """Epoch seconds on the storage clock."""
        return self.env.now()

    def trace(self, type_: str, step: str | None, **extra: Any) -> None:
        """Append an execution trace entry (never holds step arguments: no secret leaks)."""
        entry: dict[str, Any] = {"type": type_, "step": step, "at": self.now()}
        entry.update({k: v for k, v in extra.items() if v is not None})
        self.ctx.execution_trace.append(entry)

    def step_context(self, step: str, attempt: int = 0) -> StepContext:
        """The read-only :class:`StepContext` handed to user code for ``step``."""
        ctx = self.ctx
        return StepContext(
            run_id=ctx.context_id,
            reactor=ctx.reactor,
            step=step,
            attempt=attempt,
            root_run_id=ctx.root_context_id or ctx.context_id,
            parent_run_id=ctx.parent_context_id,
            map_metadata=MappingProxyType(dict(ctx.map_metadata)) if ctx.map_metadata else None,
            results=MappingProxyType(ctx.intermediate_results),
            reactor_inputs=MappingProxyType(ctx.inputs),
        )
