"""``reactor runs restore RUN_ID``: put a quarantined run back once it decodes again
(reactor/cli/runs.py; docs/run-control.md, "Restoring a quarantined run"): the restored status on
stdout, refusals on stderr with exit code 1, usage errors with exit code 2."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import Background, Reactor, config, registry, result, step
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.engine.dispatch import DispatchHandle
from reactor.jobs.sweepers import sweep_runs
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model import codec
from reactor.model.status import RunStatus


@dataclasses.dataclass(frozen=True)
class Voucher:
    """A step result of a type only a registration makes readable."""

    code: str


_TAG = "test_cli_runs_restore.Voucher"


class Issuing(Reactor, name="test_cli_runs_restore.issuing"):
    background = Background(after="issue")

    @step()
    def issue(inputs: Any, ctx: Any) -> Voucher:
        return Voucher("V-1")

    @step(voucher=result("issue"))
    def send(inputs: Any, ctx: Any) -> str:
        return f"sent {inputs.voucher.code}"

    returns = "send"


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    if not codec.is_registered(Voucher):
        codec.register_dataclass(Voucher, tag=_TAG)
    clock = ManualClock(1_700_000_000.0)
    runtime = config.configure(storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock))
    monkeypatch.setattr(runs_cli, "_runtime", lambda storage, router, setting=None: runtime)
    yield runtime
    config.reset()
    if not codec.is_registered(Voucher):
        codec.register_dataclass(Voucher, tag=_TAG)


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["runs", "restore", *args])


def _quarantined(rt: Runtime) -> str:
    """An Issuing run quarantined by a worker that lacked the Voucher registration (left
    unregistered)."""
    if not codec.is_registered(Voucher):
        codec.register_dataclass(Voucher, tag=_TAG)
    handle = Issuing.run()
    assert isinstance(handle, DispatchHandle)
    codec.unregister(Voucher)
    assert Worker(rt, liveness_wait=0.0).run_pending() == 1
    assert Issuing.find(handle.run_id).status is RunStatus.FAILED
    return handle.run_id


def test_restore_refuses_while_the_run_still_does_not_decode(rt: Runtime) -> None:
    run_id = _quarantined(rt)
    before = rt.storage.contexts.load(run_id)
    out = _invoke(run_id)
    assert out.exit_code == 1
    assert "still does not decode" in out.stderr and "unknown codec tag" in out.stderr
    assert out.stdout == ""
    assert rt.storage.contexts.load(run_id) == before  # nothing written


def test_restore_puts_the_run_back_once_the_type_is_registered(rt: Runtime) -> None:
    first, second = _quarantined(rt), _quarantined(rt)
    codec.register_dataclass(Voucher, tag=_TAG)
    out = _invoke(first)
    assert out.exit_code == 0, out.output
    assert out.stdout == f"{first}\trunning\n" and out.stderr == ""
    out = _invoke(second, "--json")
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert {k: shown[k] for k in ("run_id", "reactor", "status")} == {
        "run_id": second, "reactor": "test_cli_runs_restore.issuing", "status": "running"}
    assert shown["segments"] >= 1 and "unknown codec tag" in shown["reason"]
    assert sweep_runs(rt.storage, rt.router).redispatched == 2
    Worker(rt, liveness_wait=0.0).run_pending()
    for run_id in (first, second):
        view = Issuing.find(run_id)
        assert view.status is RunStatus.COMPLETED and view.results["send"] == "sent V-1"
    out = _invoke(first)  # no longer quarantined
    assert out.exit_code == 1 and "not quarantined" in out.stderr


def test_restore_of_an_unknown_or_healthy_run_is_refused_with_exit_1(rt: Runtime) -> None:
    out = _invoke("no-such-run")
    assert out.exit_code == 1 and "no stored run 'no-such-run'" in out.stderr
    assert out.stdout == ""
    handle = Issuing.run()
    assert isinstance(handle, DispatchHandle)
    out = _invoke(handle.run_id)
    assert out.exit_code == 1 and "is running and not quarantined" in out.stderr


def test_restore_usage_errors_exit_2(rt: Runtime) -> None:
    out = _invoke("x", "--import", "no_such_module_xyz")
    assert out.exit_code == 2 and "cannot import" in out.stderr
    run_id = _quarantined(rt)
    codec.register_dataclass(Voucher, tag=_TAG)
    assert registry.unregister(Issuing.reactor_name)
    try:
        out = _invoke(run_id)
    finally:
        registry.register(Issuing.reactor_name, Issuing)
    assert out.exit_code == 2 and "pass --import MODULE" in out.stderr
    assert Issuing.find(run_id).status is RunStatus.FAILED  # nothing written
    assert CliRunner().invoke(app, ["runs", "restore"]).exit_code == 2
