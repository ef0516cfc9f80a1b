"""Run statuses (docs/concepts.md, "Stored runs")."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TERMINAL_STATUSES", "RunStatus"]


class RunStatus(StrEnum):
    """The lifecycle status of a stored run.

    ``aborted`` means the run was interrupted in the caller's process (KeyboardInterrupt,
    SystemExit) and keeps its undo stack for ``Reactor.undo(run_id)``; ``rolling_back`` means a
    distributed map rollback is in progress; ``suspended`` means an operator holds the run
    (docs/operations.md, "Suspend and unsuspend"): it starts no step until
    ``Reactor.unsuspend``; ``failed_paused`` means a step failed under
    ``on_failure="pause"`` and the run is held before its rollback, for an operator to
    rewind, fork or cancel it (docs/operations.md, "Pause, rewind, fork"); ``needs_version``
    means no process with this definition may safely continue the run: it waits for
    ``Reactor.resume_version`` once a compatible definition is deployed (docs/deploys.md,
    "Compatibility rules"). The legacy stored
    value ``skipped`` reads as ``halted``.
    """

    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    HALTED = "halted"
    CANCELLED = "cancelled"
    ABORTED = "aborted"
    ROLLING_BACK = "rolling_back"
    SUSPENDED = "suspended"
    FAILED_PAUSED = "failed_paused"
    NEEDS_VERSION = "needs_version"

    @classmethod
    def parse(cls, value: str) -> RunStatus:
        """Read a stored status string, mapping the legacy ``skipped`` to ``halted``.

        Raises:
            ValueError: ``value`` is not a known status.
        """
        if value == "skipped":
            return cls.HALTED
        return cls(value)


#: Statuses a worker never resumes.
TERMINAL_STATUSES: frozenset[RunStatus] = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.HALTED,
        RunStatus.CANCELLED,
        RunStatus.ABORTED,
    }
)
