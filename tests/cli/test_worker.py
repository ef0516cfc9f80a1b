"""The worker logs one INFO line per run outcome: run id, reactor, status and duration
(docs/workers.md, "Running workers")."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Input, Reactor, config, input, step
from reactor.config import Runtime
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.ports.payloads import RunPayload, job


@step(x=input("x"))
def double(inputs: Any, ctx: Any) -> int:
    if inputs.x < 0:
        raise ValueError("negative")
    return int(inputs.x) * 2


class OutcomeFlow(Reactor, name="cli.outcome_log"):
    x = Input(int)
    doubled = double
    background = Background(all=True)


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    clock = ManualClock(1_700_000_000.0)
    yield config.configure(
        storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock, visibility_timeout=30)
    )
    config.reset()


def _outcomes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "reactor.worker" and "event=run_finished" in r.getMessage()]


def test_one_line_per_run_outcome(runtime: Runtime, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="reactor.worker")
    worker = Worker(runtime, liveness_wait=0.0)
    ok = OutcomeFlow.run(x=2)
    bad = OutcomeFlow.run(x=-1)
    assert isinstance(ok, DispatchHandle) and isinstance(bad, DispatchHandle)
    assert _outcomes(caplog) == []  # nothing finished yet
    assert worker.run_pending() == 2
    lines = _outcomes(caplog)
    pattern = (
        r"event=run_finished run_id={} reactor=cli\.outcome_log status={} duration=\d+\.\d{{3}}"
    )
    assert len(lines) == 2, lines
    assert re.fullmatch(pattern.format(ok.run_id, "completed"), lines[0]), lines[0]
    assert re.fullmatch(pattern.format(bad.run_id, "failed"), lines[1]), lines[1]
    assert all(r.levelno == logging.INFO for r in caplog.records
               if "event=run_finished" in r.getMessage())
    # a duplicate delivery of a finished run logs nothing more
    runtime.router.enqueue(job(RunPayload(context_id=ok.run_id, reactor="cli.outcome_log")))
    assert worker.run_pending() == 1
    assert len(_outcomes(caplog)) == 2
