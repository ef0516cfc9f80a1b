"""``reactor sweep`` without the ``--import`` a stored run needs: one clear error line naming the
reactor, with the ``--import`` hint, no traceback, exit code 2 (docs/workers.md, "Running
workers"; reactor/cli/sweep.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import (
    DispatchHandle,
    FanOut,
    Input,
    Reactor,
    config,
    element,
    input,
    map_step,
    registry,
    step,
)
from reactor.cli import sweep as sweep_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.memory import MemoryStorage
from reactor.ports.router import DeadLetter, Delivery, Job

OWNER = "test_cli_sweep_unknown.owner"


class Double(Reactor, name="test_cli_sweep_unknown.double"):
    n = Input(int)

    @step(n=input("n"))
    def double(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) * 2

    returns = "double"


class Owner(Reactor, name=OWNER):
    items = Input(list)
    doubled = map_step(Double, source=input("items"), args={"n": element("doubled")},
                       fan_out=FanOut(batch_size=2))


class Recorder:
    """A router that records jobs and runs nothing: the first throw's jobs are "lost"."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def enqueue(self, job: Job, delay_seconds: float = 0) -> str:
        self.jobs.append(job)
        return job.id

    def receive(self, max_jobs: int = 1, wait_seconds: float = 0) -> list[Delivery]:
        return []

    def ack(self, delivery: Delivery) -> None: ...
    def retry(self, delivery: Delivery, delay_seconds: float) -> None: ...
    def extend(self, delivery: Delivery, seconds: float) -> None: ...
    def dead_letter(self, delivery: Delivery, reason: str) -> None: ...

    def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        return []

    def close(self) -> None: ...


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    runtime = config.configure(storage=MemoryStorage(), router=Recorder())  # type: ignore[arg-type]
    monkeypatch.setattr(sweep_cli, "_runtime", lambda storage, router, setting=None: runtime)
    yield runtime
    config.reset()
    registry.register(OWNER, Owner)


def _lost_batch(rt: Runtime) -> str:
    """A fan-out map whose first throw settled and whose next batch trigger was lost: the map
    sweeper must run the owner reactor's code to dispatch the next throw. Returns the map id."""
    handle = Owner.run(items=[1, 2, 3, 4, 5])
    assert isinstance(handle, DispatchHandle)
    (meta,) = rt.storage.maps.scan()
    for index in (0, 1):
        rt.storage.maps.put_result(meta.map_id, index, '{"skipped": true}')
    return meta.map_id


def test_sweep_names_the_unknown_reactor_with_the_import_hint_and_exits_2(
    rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    _lost_batch(rt)
    registry.unregister(OWNER)  # a process started without --import for the owner's module
    out = CliRunner().invoke(app, ["sweep", "--storage", "memory://"])
    assert out.exit_code == 2, out.output
    assert "maps: inspected=" in out.stdout  # the counts are still printed
    (line,) = out.stderr.splitlines()
    assert line.startswith("error: ") and repr(OWNER) in line and "--import MODULE" in line
    assert "Traceback" not in out.output and "Traceback" not in caplog.text


def test_sweep_with_the_reactor_known_exits_0(rt: Runtime) -> None:
    _lost_batch(rt)
    out = CliRunner().invoke(app, ["sweep", "--storage", "memory://"])
    assert out.exit_code == 0, out.output
    assert "batches" not in out.stderr and out.stderr == ""


def test_sweep_every_reports_the_unknown_reactor_each_tick_and_goes_on(
    rt: Runtime, capsys: pytest.CaptureFixture[str]
) -> None:
    _lost_batch(rt)
    registry.unregister(OWNER)
    stop = threading.Event()
    stop.set()  # the loop's wait returns at once after the first tick
    with sweep_cli.unknown_reactors() as unknown:
        sweep_cli._loop(rt, 5.0, 100, stop, unknown)  # returns: no exit
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith("error: ") and repr(OWNER) in line and "--import MODULE" in line
    assert unknown.messages == {}  # taken for this tick
