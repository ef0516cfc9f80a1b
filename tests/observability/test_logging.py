"""Structured logs (docs/observability.md, "Structured logs"): JSON lines carrying the run id,
step and trace ids; and the worker's one ``event=run_finished`` line per run outcome."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from reactor import (
    Background,
    ConfigurationError,
    DispatchHandle,
    Failure,
    Halt,
    Input,
    Paused,
    Reactor,
    Success,
    halt,
    input,
    interrupt,
    result,
    step,
)
from reactor.cli import app
from reactor.config import Runtime
from reactor.jobs.worker import Worker
from reactor.middleware import enable_log_context
from reactor.observability import configure_json_logs
from reactor.observability.logging import JsonFormatter
from reactor.ports.payloads import RunPayload, job
from tests.observability.conftest import Telemetry

app_log = logging.getLogger("obs.app")


@step(x=input("x"))
def charge(inputs: Any, ctx: Any) -> int:
    app_log.info("charging %s", inputs.x)
    if inputs.x < 0:
        raise ValueError("negative")
    if inputs.x == 0:
        halt("nothing to charge")
    return int(inputs.x)


class Charger(Reactor, name="obs.charger"):
    x = Input(int)
    charge = charge
    returns = "charge"
    background = Background(all=True)


class Answer(BaseModel):
    ok: bool


class Approve(Reactor, name="obs.approve"):
    x = Input(int)
    charge = charge
    approval = interrupt(wait_for="charge", schema=Answer)

    @step(a=result("approval"))
    def finish(inputs: Any, ctx: Any) -> str:
        return "done"

    background = Background(all=True)


@pytest.fixture
def json_lines() -> Iterator[Callable[[], list[dict[str, Any]]]]:
    root = logging.getLogger()
    level = root.level
    stream = io.StringIO()
    handler = configure_json_logs("INFO", stream=stream)

    def lines() -> list[dict[str, Any]]:
        return [json.loads(line) for line in stream.getvalue().splitlines()]

    yield lines
    root.removeHandler(handler)
    root.setLevel(level)
    enable_log_context(False)


def test_json_lines_carry_the_run_step_job_and_trace_ids(
    telemetry: Telemetry, configure: Callable[..., Runtime],
    json_lines: Callable[[], list[dict[str, Any]]],
) -> None:
    runtime = configure(telemetry.middleware)
    handle = Charger.run(x=3)
    assert Worker(runtime, liveness_wait=0.0).run_pending() == 1
    assert handle.wait(5) == Success(3, run_id=handle.run_id)  # type: ignore[union-attr]
    lines = json_lines()
    (charging,) = [line for line in lines if line["message"] == "charging 3"]
    step_span = next(s for s in telemetry.spans() if s.name == "step charge")
    assert charging == {
        "time": charging["time"], "level": "INFO", "logger": "obs.app",
        "message": "charging 3", "run_id": handle.run_id, "reactor": "obs.charger",  # type: ignore[union-attr]
        "step": "charge", "job_id": charging["job_id"], "job_kind": "run",
        "trace_id": f"{step_span.context.trace_id:032x}",
        "span_id": f"{step_span.context.span_id:016x}",
    }
    assert charging["time"].endswith("+00:00")
    (finished,) = [line for line in lines if line.get("event") == "run_finished"]
    assert finished["run_id"] == handle.run_id  # type: ignore[union-attr]
    assert finished["job_kind"] == "run" and "step" not in finished
    assert finished["trace_id"] == charging["trace_id"]


def test_json_lines_need_no_opentelemetry_middleware(
    configure: Callable[..., Runtime], json_lines: Callable[[], list[dict[str, Any]]],
) -> None:
    runtime = configure()  # no middleware: the log context alone
    handle = Charger.run(x=-1)
    Worker(runtime, liveness_wait=0.0).run_pending()
    assert isinstance(handle.wait(5), Failure)  # type: ignore[union-attr]
    (charging,) = [line for line in json_lines() if line["message"] == "charging -1"]
    assert charging["run_id"] == handle.run_id and charging["step"] == "charge"  # type: ignore[union-attr]
    assert "trace_id" not in charging


def test_a_bad_level_is_refused_naming_it() -> None:
    with pytest.raises(ConfigurationError, match="level 'LOUD'"):
        configure_json_logs("LOUD")


def test_the_worker_logs_one_line_per_run_outcome(
    configure: Callable[..., Runtime], caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = configure()
    caplog.set_level(logging.INFO, logger="reactor.worker")
    worker = Worker(runtime, liveness_wait=0.0)
    runs = {
        "completed": Charger.run(x=2), "failed": Charger.run(x=-2), "halted": Charger.run(x=0),
        "paused": Approve.run(x=1),
    }
    assert worker.run_pending() == 4
    assert isinstance(runs["completed"].wait(5), Success)  # type: ignore[union-attr]
    assert isinstance(runs["halted"].wait(5), Halt)  # type: ignore[union-attr]
    assert isinstance(runs["paused"].wait(5), Paused)  # type: ignore[union-attr]
    lines = [r.getMessage() for r in caplog.records if "event=run_finished" in r.getMessage()]
    for status, handle in runs.items():
        mine = [line for line in lines if f"run_id={handle.run_id} " in line]  # type: ignore[union-attr]
        assert len(mine) == 1, (status, lines)
        assert f" status={status} " in mine[0]
    # redeliveries of finished and paused runs log nothing more
    for handle in runs.values():
        assert isinstance(handle, DispatchHandle)
        runtime.router.enqueue(job(RunPayload(context_id=handle.run_id, reactor=handle.reactor)))
    assert worker.run_pending() == 4
    assert len([r for r in caplog.records if "event=run_finished" in r.getMessage()]) == 4


def test_reactor_worker_log_format_json_installs_the_json_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Worker, "serve", lambda self, **_: 0)  # start nothing
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    try:
        done = CliRunner().invoke(app, ["worker", "--log-format", "json"])
        assert done.exit_code == 0, done.output
        added = [h for h in root.handlers if h not in before]
        assert [type(h.formatter) for h in added] == [JsonFormatter]
    finally:
        for handler in root.handlers[:]:
            if handler not in before:
                root.removeHandler(handler)
        root.setLevel(level)
        enable_log_context(False)
    done = CliRunner().invoke(app, ["worker", "--log-format", "xml"])
    assert done.exit_code == 2
    assert "bad --log-format 'xml': expected text or json" in done.output
