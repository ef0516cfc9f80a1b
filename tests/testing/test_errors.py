"""The kit's errors: ``NotIdleError`` names what is pending; ``InjectedFault`` is ordinary."""

from __future__ import annotations

from reactor import ReactorError
from reactor.ports.router import Job
from reactor.testing import InjectedFault, NotIdleError, PendingJob


def _pending(n: int) -> list[PendingJob]:
    return [
        PendingJob.of(Job(kind="run", payload={"context_id": f"run-{i}", "reactor": "r"}),
                      due_at=100.0 + i, now=100.0)
        for i in range(n)
    ]


def test_not_idle_error_names_up_to_twenty_jobs() -> None:
    error = NotIdleError("ran 3 jobs", _pending(25))
    assert isinstance(error, ReactorError)
    text = str(error)
    assert text.startswith("the reactor test environment did not become idle: ran 3 jobs; ")
    assert "25 job(s) still pending" in text
    assert "run job reactor=r run=run-0 due now" in text
    assert "run=run-19 due in 19s" in text and "run-20" not in text
    assert "... and 5 more" in text
    assert len(error.pending) == 25


def test_injected_fault_is_an_ordinary_retryable_exception() -> None:
    fault = InjectedFault("boom")
    assert isinstance(fault, Exception) and getattr(fault, "retryable", True) is True
