"""The contract suite's per-test timeout: a contract run never hangs (docs/contract-suite.md,
"Per-test timeout").

Registered by :mod:`reactor_contract.plugin` when the suite's options are given. Each test gets
``--reactor-test-timeout`` seconds (default :data:`DEFAULT_TEST_TIMEOUT`) for its setup, call
and teardown together. When they run out, the phase in progress fails with a message that names
the test and the adapter mistakes that usually cause a hang; the traceback shows where the test
was stuck. ``0`` disables the timeout.

The alarm is ``SIGALRM`` (POSIX, main thread). It nests with an alarm already armed (for
example pytest-timeout's ``signal`` method): a tighter outer alarm is left alone, a looser one
is re-armed with its remaining time afterwards. Where ``SIGALRM`` is unavailable (Windows, a
test run off the main thread) :func:`faulthandler.dump_traceback_later` ends the process
instead, printing every thread's stack: a hard stop, but never a hang.
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import threading
import time
from collections.abc import Generator
from types import FrameType
from typing import Any

import pytest

__all__ = ["DEFAULT_TEST_TIMEOUT", "LIKELY_CAUSES", "ContractTimeout"]

#: Seconds a contract test may take, setup and teardown included (router tests wait at most a
#: few visibility windows of 1 s; the slowest storage test takes about 3 s on memory://). A
#: slow backend takes a larger ``--reactor-test-timeout`` (scripts/test gives the Python test
#: servers, SecantusDB and moto, 240 s).
DEFAULT_TEST_TIMEOUT = 60.0

#: What usually makes a contract test hang, in the order worth checking.
LIKELY_CAUSES = (
    "a keyset scan whose `after` is not strictly greater (`>=` instead of `>`), so a pager "
    "never advances",
    "a compare-and-set that never succeeds (a version that changes on read, or an "
    "expected_version that is never matched), so a read-modify-write loop retries forever",
    "a blocking call on a dead or exhausted connection (no socket timeout)",
    "a receive or wait that ignores its timeout argument",
)


class ContractTimeout:
    """A pytest plugin object failing any test that outlives its budget.

    Its hook wrappers are the innermost (``trylast``): the alarm is armed around the test's
    own setup, call and teardown only, never around pytest's wrappers (output capture,
    logging). An alarm that fired inside the capture wrapper's code (a teardown whose budget
    was used up gets a 1 ms alarm) left the output redirected to the capture file, so the
    session's report was lost.

    Args:
        seconds: the budget of one test (setup + call + teardown); ``<= 0`` disables it.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self._deadline: dict[str, float] = {}

    def message(self, nodeid: str, phase: str) -> str:
        """The failure text: the test, the budget, the likely adapter mistakes."""
        causes = "\n".join(f"  - {cause}" for cause in LIKELY_CAUSES)
        return (
            f"reactor contract: {nodeid} did not finish its {phase} within {self.seconds:g}s "
            f"(--reactor-test-timeout). No contract test waits that long on a responsive "
            f"backend, so the adapter is stuck. Likely causes:\n{causes}\n"
            "The traceback shows where it was stuck. If it was only slow (a test server "
            "written in Python, a loaded machine, a remote database), give a larger "
            "--reactor-test-timeout (docs/contract-suite.md, \"Per-test timeout\")."
        )

    def _remaining(self, item: pytest.Item) -> float:
        deadline = self._deadline.setdefault(item.nodeid, time.monotonic() + self.seconds)
        return max(deadline - time.monotonic(), 0.001)

    def _guard(self, item: pytest.Item, phase: str) -> Generator[None, Any, Any]:
        if self.seconds <= 0:
            return (yield)
        budget = self._remaining(item)
        text = self.message(item.nodeid, phase)
        main = threading.current_thread() is threading.main_thread()
        usable = hasattr(signal, "SIGALRM") and main
        if not usable:
            faulthandler.dump_traceback_later(budget, exit=True, file=sys.stderr)
            try:
                return (yield)
            finally:
                faulthandler.cancel_dump_traceback_later()

        def on_alarm(signum: int, frame: FrameType | None) -> None:
            pytest.fail(text, pytrace=True)

        previous = signal.signal(signal.SIGALRM, on_alarm)
        outer, _ = signal.setitimer(signal.ITIMER_REAL, budget)
        if 0 < outer <= budget:  # a tighter alarm is already armed: leave it to fire
            signal.setitimer(signal.ITIMER_REAL, outer)
            signal.signal(signal.SIGALRM, previous)
            return (yield)
        started = time.monotonic()
        try:
            return (yield)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if outer > 0:
                signal.setitimer(
                    signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001)
                )

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """Arm the alarm around the test's setup (fixtures: connections, fresh namespaces)."""
        return (yield from self._guard(item, "setup"))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """Arm the alarm around the test itself, with what is left of the budget."""
        return (yield from self._guard(item, "call"))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, Any]:
        """Arm the alarm around the teardown (closing the storage), then forget the test."""
        try:
            return (yield from self._guard(item, "teardown"))
        finally:
            self._deadline.pop(item.nodeid, None)
