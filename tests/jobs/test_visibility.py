"""A delivered job's visibility lease while a worker runs it (reactor/jobs/visibility.py;
docs/concepts.md, "Heartbeats")."""

from __future__ import annotations

from typing import Any

import pytest

from reactor.jobs.visibility import VisibilityLease
from reactor.memory import LocalRouter
from reactor.memory.clock import ManualClock
from reactor.ports.payloads import RunPayload, job
from reactor.ports.router import Delivery


class _Router(LocalRouter):
    def __init__(self, fail: bool = False) -> None:
        super().__init__(clock=ManualClock(1_800_000_000.0))
        self.extensions: list[float] = []
        self.fail = fail

    def extend(self, delivery: Delivery, seconds: float) -> None:
        self.extensions.append(seconds)
        if self.fail:
            raise OSError("router down")
        super().extend(delivery, seconds)


def _delivery(router: LocalRouter) -> Delivery:
    router.enqueue(job(RunPayload(context_id="r1", reactor="x")))
    [delivery] = router.receive(1, 0.0)
    return delivery


def test_at_most_sets_the_shorter_lease_at_once_and_restores_the_workers() -> None:
    router = _Router()
    lease = VisibilityLease(router, _delivery(router), 30).start()
    try:
        with lease.at_most(3):
            assert router.extensions == [3]
        assert router.extensions == [3, 30]
        with lease.at_most(60):  # never longer than the worker's own lease
            pass
        assert router.extensions == [3, 30]
    finally:
        lease.stop()


def test_a_failed_change_is_logged_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    router = _Router()
    lease = VisibilityLease(router, _delivery(router), 30).start()
    router.fail = True
    try:
        with lease.at_most(3):
            pass
    finally:
        lease.stop()
    assert router.extensions[:2] == [3, 30]
    assert "event=visibility_change_failed" in caplog.text


def test_after_stop_no_change_is_sent() -> None:
    router = _Router()
    lease: Any = VisibilityLease(router, _delivery(router), 30).start()
    lease.stop()
    with lease.at_most(3):
        pass
    assert router.extensions == []
