"""``reactor runs rewind RUN_ID [--from STEP]`` and ``reactor runs fork RUN_ID --from STEP
[--input-patch JSON]`` (reactor/cli/runs.py; docs/operations.md, "Pause, rewind, fork"): the
outcome on stdout, errors on stderr with exit codes 1 (refused, unknown run, failed again) and
2 (usage)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import Input, Reactor, config, step
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.dsl import input
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.results import Failure
from reactor.model.status import RunStatus

ran: list[str] = []
broken = [True]


class Payout(Reactor, name="test_cli_runs_rewind.payout"):
    on_failure = "pause"
    iban = Input(str)

    @step()
    def debit(inputs: Any, ctx: Any) -> str:
        ran.append("debit")
        return "debited"

    @step(iban=input("iban"), wait_for=["debit"])
    def transfer(inputs: Any, ctx: Any) -> str:
        ran.append(f"transfer {inputs.iban}")
        if broken[0]:
            raise ConnectionError("bank down")
        return "sent"


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    ran.clear()
    broken[0] = True
    clock = ManualClock(1_700_000_000.0)
    runtime = config.configure(storage=MemoryStorage(clock=clock),
                               router=LocalRouter(clock=clock, workers=0))
    monkeypatch.setattr(runs_cli, "_runtime", lambda storage, router, setting=None: runtime)
    yield runtime
    config.reset()


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["runs", *args])


def _held() -> str:
    out = Payout.run(iban="DE01")
    assert isinstance(out, Failure) and out.run_id is not None
    return out.run_id


def test_rewind_a_held_run_after_the_fix(rt: Runtime) -> None:
    run_id = _held()
    failed_again = _invoke("rewind", run_id, "--by", "ops")
    assert failed_again.exit_code == 1
    assert failed_again.stdout == f"{run_id}\tfailed_paused\n"
    assert "bank down" in failed_again.stderr
    broken[0] = False
    out = _invoke("rewind", run_id, "--from", "transfer", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {"run_id": run_id, "status": "completed",
                                      "from": "transfer"}
    assert ran == ["debit", "transfer DE01", "transfer DE01", "transfer DE01"]


def test_rewind_refusals_exit_with_a_reason(rt: Runtime) -> None:
    run_id = _held()
    unknown_step = _invoke("rewind", run_id, "--from", "nope")
    assert unknown_step.exit_code == 2 and "nope" in unknown_step.stderr
    unknown_run = _invoke("rewind", "no-such-run")
    assert unknown_run.exit_code == 1 and "no-such-run" in unknown_run.stderr
    assert Payout.find(run_id).status is RunStatus.FAILED_PAUSED


def test_fork_with_an_input_patch(rt: Runtime) -> None:
    run_id = _held()
    broken[0] = False
    out = _invoke("fork", run_id, "--from", "transfer", "--input-patch", '{"iban": "DE02"}',
                  "--json")
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert shown["status"] == "completed" and shown["forked_from"] == run_id
    assert shown["run_id"] != run_id
    assert ran == ["debit", "transfer DE01", "transfer DE02"]  # debit copied, not run again
    assert Payout.find(run_id).status is RunStatus.FAILED_PAUSED


def test_fork_refusals_exit_with_a_reason(rt: Runtime) -> None:
    run_id = _held()
    for patch in ("{bad", '{"ghost": 1}'):
        out = _invoke("fork", run_id, "--from", "transfer", "--input-patch", patch)
        assert out.exit_code == 2 and "input_patch" in out.stderr, out.output
    missing = _invoke("fork", run_id)
    assert missing.exit_code == 2
