"""``JobContext``: what a job handler knows about the job it runs (docs/architecture.md,
"Job kinds"), and the ``Handler`` signature every handler in :mod:`reactor.jobs.handlers`
has."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from reactor.config import Runtime
from reactor.engine.env import Env, make_env
from reactor.jobs.visibility import VisibilityLease
from reactor.ports.payloads import job as make_job
from reactor.ports.router import Delivery, Job

__all__ = ["Handler", "JobContext"]


@dataclass(frozen=True)
class JobContext:
    """What a handler knows about the job it runs.

    Attributes:
        runtime: the worker's storage, router and settings.
        job: the job envelope (``attempt`` counts re-enqueues of this job chain).
        delivery: the router delivery, ``None`` when run inline.
        inline: the job runs nested inside the thread that enqueued it (inline router): no
            liveness-lock stamping, and a lock held by this thread is re-entered.
        liveness_wait: seconds a handler polls a held liveness lock before re-enqueueing
            (default 2 s).
        visibility: the delivery's visibility lease the worker renews while the job runs
            (a heartbeat step shortens it: docs/concepts.md, "Heartbeats"); ``None`` when
            run inline or by an async slot.
    """

    runtime: Runtime
    job: Job
    delivery: Delivery | None = None
    inline: bool = False
    liveness_wait: float = 2.0
    visibility: VisibilityLease | None = None

    def env(self) -> Env:
        """The execution environment of this job's engine work: the worker's runtime, marked
        ``in_worker`` unless run inline, with :attr:`visibility`'s shortening for a heartbeat
        step (docs/concepts.md, "Heartbeats")."""
        visibility = self.visibility
        return replace(
            make_env(self.runtime), in_worker=not self.inline,
            unit_lease=None if visibility is None else visibility.at_most,
        )

    def requeue(self, payload: Any, delay_seconds: float) -> str:
        """Enqueue the next job of this chain (``attempt + 1``) with ``payload`` after
        ``delay_seconds``.

        Returns:
            The new job id.
        """
        return self.runtime.router.enqueue(
            make_job(payload, attempt=self.job.attempt + 1), max(delay_seconds, 0.0)
        )


Handler = Callable[[JobContext, Any], None]
