"""Stored runs as users see them (docs/concepts.md, "Stored runs"; docs/run-control.md).

The public home of the run views: what :meth:`reactor.Reactor.find` returns, the statuses a
run moves through, and the handle a background run's caller gets::

    from reactor.runs import RunStatus, RunView

    view: RunView = Payment.find(run_id)
    if view.status in TERMINAL_STATUSES: ...
"""

from __future__ import annotations

from reactor.engine.dispatch import DispatchHandle
from reactor.model.run_view import RunView, TraceEntry
from reactor.model.status import TERMINAL_STATUSES, RunStatus

__all__ = ["TERMINAL_STATUSES", "DispatchHandle", "RunStatus", "RunView", "TraceEntry"]
