"""The retry loop (docs/concepts.md, "Retries").

A synchronous caller waits in-thread between attempts, through the run's retry wait
(:attr:`reactor.engine.env.Env.sleep`): the runtime clock's ``sleep``
(``reactor.configure(clock=...)``, docs/testing.md, "The clock"), or a per-run ``sleep=``
passed to ``Reactor.execute``. A worker running a run hands the wait to the router instead
(:class:`reactor.engine.background.RetryLater`); an ``async_step`` unit retries inside its
job, waiting on the runtime clock.

A ``Failure`` stops the loop at once when it is not retryable (``retryable=False``, an error
whose ``retryable`` attribute is ``False``, input validation and argument errors).
Compensation runs once, after the final attempt (the caller's business).
"""

from __future__ import annotations

from collections.abc import Callable

from reactor.dsl.retries import Retries
from reactor.model.results import Failure, Result

__all__ = ["attempt_with_retries"]


def attempt_with_retries(
    policy: Retries,
    attempt: Callable[[int], Result],
    *,
    on_retry: Callable[[int, float, Failure], None],
    sleep_fn: Callable[[float], None],
    first_attempt: int = 1,
    cut: Callable[[int, float, Failure], Failure | None] | None = None,
) -> tuple[Result, int]:
    """Call ``attempt(n)`` until it does not fail, is not retryable, or attempts run out.

    Args:
        policy: the step's retry policy.
        attempt: runs attempt ``n`` (1-based) and returns its result.
        on_retry: called with ``(failed_attempt, delay_seconds, failure)`` before each wait.
        sleep_fn: waits ``delay_seconds``.
        first_attempt: the number of the first attempt to make (a run re-enqueued by a worker
            retry resumes at the attempt after the one that failed).
        cut: called with ``(failed_attempt, delay_seconds, failure)`` before each wait; a
            ``Failure`` it returns is the final result instead of the retry (a run deadline
            the wait would pass); ``None``: retry.

    Returns:
        ``(final_result, attempts_used)``.
    """
    n = max(first_attempt, 1)
    while True:
        result = attempt(n)
        if (
            not isinstance(result, Failure)
            or not result.is_retryable
            or n >= policy.max_attempts
        ):
            return result, n
        delay = policy.delay(n)
        if cut is not None:
            final = cut(n, delay, result)
            if final is not None:
                return final, n
        on_retry(n, delay, result)
        sleep_fn(delay)
        n += 1
