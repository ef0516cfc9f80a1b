"""The retry loop and its sleep hook (docs/concepts.md, "Retries").

A synchronous caller sleeps in-thread between attempts. Sleeping goes through the module-level
hook :data:`sleep` (default :func:`time.sleep`), or a per-run ``sleep=`` passed to
``Reactor.execute``, so tests never really sleep::

    monkeypatch.setattr(reactor.engine.retries, "sleep", delays.append)

A ``Failure`` stops the loop at once when it is not retryable (``retryable=False``, an error
whose ``retryable`` attribute is ``False``, input validation and argument errors).
Compensation runs once, after the final attempt (the caller's business).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from reactor.dsl.retries import Retries
from reactor.model.results import Failure, Result

__all__ = ["attempt_with_retries", "default_sleep", "install_sleep", "sleep"]

#: The process-wide sleep hook (seconds). Replace it (e.g. with ``monkeypatch``) in tests.
sleep: Callable[[float], None] = time.sleep


def default_sleep(seconds: float) -> None:
    """Sleep through the current module-level :data:`sleep` hook (looked up at call time)."""
    sleep(seconds)


def install_sleep(fn: Callable[[float], None] | None) -> Callable[[float], None]:
    """Install ``fn`` as the process-wide retry sleep hook :data:`sleep` and return the hook
    it replaced (``None`` installs :func:`time.sleep`).

    Exists so ``reactor.testing`` can make retry waits advance its test clock, and restore
    the previous hook afterwards, without anyone patching this module (docs/testing.md).
    """
    global sleep
    previous, sleep = sleep, (time.sleep if fn is None else fn)
    return previous


def attempt_with_retries(
    policy: Retries,
    attempt: Callable[[int], Result],
    *,
    on_retry: Callable[[int, float, Failure], None],
    sleep_fn: Callable[[float], None],
    first_attempt: int = 1,
) -> tuple[Result, int]:
    """Call ``attempt(n)`` until it does not fail, is not retryable, or attempts run out.

    Args:
        policy: the step's retry policy.
        attempt: runs attempt ``n`` (1-based) and returns its result.
        on_retry: called with ``(failed_attempt, delay_seconds, failure)`` before each wait.
        sleep_fn: waits ``delay_seconds``.
        first_attempt: the number of the first attempt to make (a run re-enqueued by a worker
            retry resumes at the attempt after the one that failed).

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
        on_retry(n, delay, result)
        sleep_fn(delay)
        n += 1
