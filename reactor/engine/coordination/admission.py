"""Whether a run passed its reactor-level gates once (``EngineState.admitted``; docs/workers.md,
"Decisions", "Snooze counting").
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reactor.model.context import Context


def is_admitted(ctx: Context) -> bool:
    """Whether the run passed its reactor-level gates once (``EngineState.admitted``).

    A run with recorded progress (a result or an undo entry) counts as admitted
    (docs/workers.md, "Decisions", "Snooze counting").

    Args:
        ctx: the run's context.

    Returns:
        ``True`` when the run was admitted or has progress.
    """
    return ctx.engine_state.admitted or bool(ctx.intermediate_results or ctx.undo_stack)


def mark_admitted(ctx: Context) -> None:
    """Record that the run passed its reactor-level gates (called once they are taken; kept
    forever, so parks, retries and redeliveries never re-charge them; docs/workers.md,
    "Decisions", "Snooze counting").

    Args:
        ctx: the run's context (``EngineState.admitted`` is set).
    """
    ctx.engine_state = replace(ctx.engine_state, admitted=True)
