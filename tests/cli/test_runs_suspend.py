"""``reactor runs suspend RUN_ID`` and ``reactor runs unsuspend RUN_ID`` (reactor/cli/runs.py;
docs/operations.md, "Suspend and unsuspend"): the outcome on stdout, errors on stderr with exit
codes 1 (refused, unknown run) and 2 (usage)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import Background, Reactor, config, step
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.status import RunStatus

ran: list[str] = []


class Nightly(Reactor, name="test_cli_runs_suspend.nightly"):
    background = Background(all=True)

    @step()
    def settle(inputs: Any, ctx: Any) -> str:
        ran.append("settle")
        return "settled"


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    ran.clear()
    clock = ManualClock(1_700_000_000.0)
    runtime = config.configure(storage=MemoryStorage(clock=clock),
                               router=LocalRouter(clock=clock, workers=0))
    monkeypatch.setattr(runs_cli, "_runtime", lambda storage, router, setting=None: runtime)
    yield runtime
    config.reset()


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["runs", *args])


def test_suspend_then_unsuspend_a_queued_run(rt: Runtime) -> None:
    handle = Nightly.run()
    run_id = handle.run_id or ""
    out = _invoke("suspend", run_id, "--reason", "ledger migration", "--by", "ops")
    assert out.exit_code == 0, out.output
    assert out.stdout == f"{run_id}\tsuspended\n" and out.stderr == ""
    view = Nightly.find(run_id)
    assert view.status is RunStatus.SUSPENDED
    assert view.suspension is not None and view.suspension.by == "ops"
    again = _invoke("unsuspend", run_id, "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == {"run_id": run_id, "status": "running"}
    assert Nightly.find(run_id).status is RunStatus.RUNNING
    assert ran == []  # a worker continues it


def test_refusals_exit_1_and_usage_errors_exit_2(rt: Runtime) -> None:
    handle = Nightly.run()
    run_id = handle.run_id or ""
    unknown = _invoke("suspend", "no-such-run")
    assert unknown.exit_code == 1 and "no-such-run" in unknown.stderr
    not_suspended = _invoke("unsuspend", run_id)
    assert not_suspended.exit_code == 1 and "not suspended" in not_suspended.stderr
    too_long = _invoke("suspend", run_id, "--reason", "x" * 1001)
    assert too_long.exit_code == 2 and "reason" in too_long.stderr
    assert Nightly.find(run_id).status is RunStatus.RUNNING  # nothing changed


def test_every_run_of_a_reactor_is_suspended_and_let_go(rt: Runtime) -> None:
    first, second = Nightly.run(), Nightly.run()
    out = _invoke("suspend", "--reactor", Nightly.reactor_name, "--by", "ops", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {"reactor": Nightly.reactor_name, "suspended": 2,
                                      "requested": 0, "skipped": 0}
    for handle in (first, second):
        assert Nightly.find(handle.run_id or "").status is RunStatus.SUSPENDED
    back = _invoke("unsuspend", "--reactor", Nightly.reactor_name)
    assert back.exit_code == 0, back.output
    assert back.stdout == f"{Nightly.reactor_name}\trunning=2\tpaused=0\tskipped=0\n"
    both = _invoke("suspend", first.run_id or "", "--reactor", Nightly.reactor_name)
    assert both.exit_code == 2 and "exactly one" in both.stderr
    neither = _invoke("unsuspend")
    assert neither.exit_code == 2
    unknown = _invoke("suspend", "--reactor", "no.such.reactor")
    assert unknown.exit_code == 2


def test_hold_new_holds_a_run_started_after_it_until_unsuspend_reactor(rt: Runtime) -> None:
    out = _invoke("suspend", "--reactor", Nightly.reactor_name, "--hold-new", "--reason",
                  "ledger migration", "--by", "ops", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {"reactor": Nightly.reactor_name, "suspended": 0,
                                      "requested": 0, "skipped": 0, "hold_new": 1}
    later = Nightly.run()
    run_id = later.run_id or ""
    Worker(rt, liveness_wait=0.0).run_pending()
    view = Nightly.find(run_id)
    assert view.status is RunStatus.SUSPENDED and ran == []
    assert view.suspension is not None and view.suspension.reason == "ledger migration"
    refused = _invoke("unsuspend", run_id)  # the switch still holds it
    assert refused.exit_code == 1 and "switch" in refused.stderr
    back = _invoke("unsuspend", "--reactor", Nightly.reactor_name)
    assert back.stdout == f"{Nightly.reactor_name}\trunning=1\tpaused=0\tskipped=0\n"
    assert Nightly.suspend_switch() is None
    Worker(rt, liveness_wait=0.0).run_pending()
    assert Nightly.find(run_id).status is RunStatus.COMPLETED and ran == ["settle"]


def test_hold_new_without_reactor_is_a_usage_error(rt: Runtime) -> None:
    handle = Nightly.run()
    out = _invoke("suspend", handle.run_id or "", "--hold-new")
    assert out.exit_code == 2 and "--reactor" in out.stderr
    assert Nightly.find(handle.run_id or "").status is RunStatus.RUNNING
    assert Nightly.suspend_switch() is None
