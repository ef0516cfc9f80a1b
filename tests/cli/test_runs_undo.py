"""``reactor runs undo RUN_ID``: roll back a finished or aborted run of any registered reactor
(reactor/cli/runs.py; docs/run-control.md, "Undoing a run"): the status on stdout, errors on
stderr with exit codes 1 (refused, failed, unknown run) and 2 (usage)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import Background, Input, Reactor, config, input, registry, result, step
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.memory import InlineRouter, LocalRouter, ManualClock, MemoryStorage
from reactor.model.status import RunStatus

SECRET = "tok_visa_UNDO_4242"
effects: list[str] = []


class Booking(Reactor, name="test_cli_runs_undo.booking"):
    """Holds a seat, charges a card; ``at_charge`` = ``"abort"`` aborts the run (Ctrl-C),
    ``"decline"`` fails it."""

    card_token = Input(str, redact=True)
    at_charge = Input(str, default="ok")
    broken_release = Input(bool, default=False)

    @step(broken_release=input("broken_release"))
    def hold(inputs: Any, ctx: Any) -> str:
        effects.append("hold")
        return "seat-7"

    @hold.undo
    def release(result: str, inputs: Any, ctx: Any) -> None:
        if inputs.broken_release:
            raise ConnectionError("seat service down")
        effects.append(f"release {result}")

    @step(card_token=input("card_token"), seat=result("hold"), at_charge=input("at_charge"))
    def charge(inputs: Any, ctx: Any) -> str:
        if inputs.at_charge == "abort":
            raise KeyboardInterrupt
        if inputs.at_charge == "decline":
            raise RuntimeError("card declined")
        effects.append(f"charge {inputs.card_token[-4:]}")
        return "ch-1"

    @charge.undo
    def refund(result: str, inputs: Any, ctx: Any) -> None:
        effects.append(f"refund {result}")


class Queued(Reactor, name="test_cli_runs_undo.queued"):
    background = Background(all=True)

    @step()
    def noop(inputs: Any, ctx: Any) -> int:
        return 1


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    effects.clear()
    runtime = config.configure(storage=MemoryStorage(clock=ManualClock(1_700_000_000.0)),
                               router=InlineRouter())
    monkeypatch.setattr(runs_cli, "_runtime", lambda storage, router, setting=None: runtime)
    yield runtime
    config.reset()


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["runs", "undo", *args])


def test_undo_rolls_back_a_completed_run_newest_first(rt: Runtime) -> None:
    done = Booking.run(card_token=SECRET)
    assert done.success and effects == ["hold", "charge 4242"]
    out = _invoke(done.run_id or "")
    assert out.exit_code == 0, out.output
    assert out.stdout == f"{done.run_id}\tcancelled\n" and out.stderr == ""
    assert effects[2:] == ["refund ch-1", "release seat-7"]
    assert Booking.find(done.run_id or "").status is RunStatus.CANCELLED
    again = _invoke(done.run_id or "", "--json")  # nothing left: undone once only
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == {"run_id": done.run_id, "status": "cancelled",
                                        "rollback_failures": []}
    assert len(effects) == 4
    assert SECRET not in out.output + again.output


def test_undo_finishes_the_rollback_of_an_aborted_run(rt: Runtime) -> None:
    with pytest.raises(KeyboardInterrupt) as info:
        Booking.run(card_token=SECRET, at_charge="abort")
    run_id = info.value.reactor_run_id  # type: ignore[attr-defined]
    view = Booking.find(run_id)
    assert view.status is RunStatus.ABORTED and len(view.undo_stack) == 1
    out = _invoke(run_id, "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["status"] == "cancelled"
    assert effects == ["hold", "release seat-7"]
    assert Booking.find(run_id).undo_stack == ()


def test_undo_of_a_failed_run_leaves_it_as_it_is(rt: Runtime) -> None:
    failed = Booking.run(card_token=SECRET, at_charge="decline")
    assert not failed.success and effects == ["hold", "release seat-7"]
    out = _invoke(failed.run_id or "")  # already rolled back: nothing to do, exit 0
    assert out.exit_code == 0, out.output
    assert out.stdout == f"{failed.run_id}\tfailed\n"
    assert effects == ["hold", "release seat-7"]
    assert Booking.find(failed.run_id or "").status is RunStatus.FAILED


def test_undo_reports_an_incomplete_rollback_with_exit_1(rt: Runtime) -> None:
    done = Booking.run(card_token=SECRET, broken_release=True)
    out = _invoke(done.run_id or "")
    assert out.exit_code == 1
    assert out.stdout == f"{done.run_id}\tcancelled\n"  # refunded, but the seat is still held
    assert "hold undo" in out.stderr and "seat service down" in out.stderr
    assert "incomplete" in out.stderr and "reactor runs show" in out.stderr
    assert effects[2:] == ["refund ch-1"]
    done = Booking.run(card_token=SECRET, broken_release=True)
    out = _invoke(done.run_id or "", "--json")
    assert out.exit_code == 1
    (failure,) = json.loads(out.stdout)["rollback_failures"]
    assert (failure["step"], failure["kind"]) == ("hold", "undo")
    assert "seat service down" in failure["message"]


def test_undo_refuses_an_unknown_or_unfinished_run_with_exit_1(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _invoke("no-such-run")
    assert out.exit_code == 1 and "no stored run 'no-such-run'" in out.stderr
    assert out.stdout == ""
    queued = config.configure(storage=rt.storage, router=LocalRouter())  # no worker: running
    monkeypatch.setattr(runs_cli, "_runtime", lambda storage, router, setting=None: queued)
    handle = Queued.run()
    out = _invoke(handle.run_id or "")
    assert out.exit_code == 1 and "only a finished or aborted run can be undone" in out.stderr
    assert out.stdout == ""
    assert Queued.find(handle.run_id or "").status is RunStatus.RUNNING


def test_undo_usage_errors_exit_2(rt: Runtime) -> None:
    out = _invoke("x", "--import", "no_such_module_xyz")
    assert out.exit_code == 2 and "cannot import" in out.stderr
    done = Booking.run(card_token=SECRET)
    assert registry.unregister(Booking.reactor_name)  # a reactor no --import registered
    try:
        out = _invoke(done.run_id or "")
    finally:
        registry.register(Booking.reactor_name, Booking)
    assert out.exit_code == 2 and "pass --import MODULE" in out.stderr
    assert Booking.find(done.run_id or "").status is RunStatus.COMPLETED
    out = CliRunner().invoke(app, ["runs", "undo"])
    assert out.exit_code == 2
