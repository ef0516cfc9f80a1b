"""The errors the testing kit raises (docs/testing.md, "Errors").

:class:`InjectedFault` is what an injected step failure raises by default;
:class:`NotIdleError` is what :meth:`reactor.testing.TestEnvironment.run_until_idle` raises
when the jobs do not settle within its bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from reactor.errors import ReactorError

if TYPE_CHECKING:
    from reactor.testing.jobs import PendingJob

__all__ = ["InjectedFault", "NotIdleError"]


class InjectedFault(Exception):  # noqa: N818 - named for what it is, like LockLost
    """The default error of :meth:`reactor.testing.TestEnvironment.fail_step`.

    An ordinary, retryable exception: the engine treats it like any error a step body raises
    (retried under the step's ``Retries``, then compensated and rolled back).
    """


class NotIdleError(ReactorError):
    """Jobs were still pending when :meth:`reactor.testing.TestEnvironment.run_until_idle`
    (or :meth:`~reactor.testing.TestEnvironment.run_pending`) reached one of its bounds
    (docs/testing.md, "Running jobs to completion").

    Args:
        reason: which bound was reached.
        pending: the jobs still queued, earliest due first.

    Attributes:
        pending: the jobs still queued (:class:`reactor.testing.PendingJob`), earliest due
            first; the message names up to 20 of them.
    """

    def __init__(self, reason: str, pending: Sequence[PendingJob]) -> None:
        shown = "\n".join(f"  - {job.describe()}" for job in pending[:20])
        more = f"\n  ... and {len(pending) - 20} more" if len(pending) > 20 else ""
        super().__init__(
            f"the reactor test environment did not become idle: {reason}; "
            f"{len(pending)} job(s) still pending:\n{shown}{more}"
        )
        self.pending = tuple(pending)
