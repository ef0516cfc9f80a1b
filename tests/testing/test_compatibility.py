"""``reactor.testing.assert_can_continue`` and ``compatibility_report``: a new definition
judged against stored runs of an old one at every position (reactor/testing/compatibility.py;
docs/deploys.md, "Testing a new definition"), and that page's example run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor import Input, Reactor, input, interrupt, registry, result, step
from reactor.errors import MigrationArgumentError
from reactor.testing import Position, assert_can_continue, compatibility_report

ROOT = Path(__file__).resolve().parents[2]
NAME = "tests.testing.compat.shop"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    registry.unregister(NAME)
    yield
    registry.unregister(NAME)


def _shop(first: str = "reserve", *, undo: bool = True, charge_reads: str | None = None,
          extra: bool = False) -> type[Reactor]:
    """``first`` (with an undo unless ``undo=False``), an interrupt ``approval``, then
    ``charge`` reading ``charge_reads`` (default: ``first``'s result); ``extra`` adds
    ``notify`` after ``charge``."""
    registry.unregister(NAME)

    class Shop(Reactor, name=NAME):
        order = Input(str)
        locals()[first] = step(order=input("order"))(lambda inputs, ctx: "r")
        if undo:
            locals()[first].undo(lambda result, inputs, ctx: None)
        approval = interrupt(wait_for=first)

        @step(reservation=result(charge_reads or first), wait_for=["approval"])
        def charge(inputs: Any, ctx: Any) -> str:
            return "c"

        if extra:
            @step(wait_for=["charge"])
            def notify(inputs: Any, ctx: Any) -> None:
                return None

    return Shop


def test_every_position_is_judged_forward_and_as_a_rollback() -> None:
    v1 = _shop()
    report = compatibility_report(v1, _shop(extra=True))
    assert [v.position for v in report] == [
        Position((), "reserve"), Position(("reserve",), "approval"),
        Position(("reserve", "approval"), "charge"),
        Position(("reserve", "approval", "charge"), None),
    ]
    assert all(v.ok for v in report)
    assert_can_continue(v1, _shop(extra=True))


def test_a_renamed_step_fails_with_the_position_rule_and_step() -> None:
    v1 = _shop()
    v2 = _shop("hold_stock")
    with pytest.raises(AssertionError) as failed:
        assert_can_continue(v1, v2)
    text = str(failed.value)
    assert "at 'approval' after reserve: cannot roll back: completed_step_removed " \
           "(step 'reserve')" in text
    assert "at 'reserve' after nothing: cannot continue: current_step_removed" in text
    assert_can_continue(v1, v2, renames={"reserve": "hold_stock"})


def test_a_rewired_pending_step_is_refused_only_where_it_has_not_run() -> None:
    v1 = _shop()
    v2 = _shop(charge_reads="approval")
    report = {v.position.at: v for v in compatibility_report(v1, v2)}
    forward = report["approval"].forward
    assert forward is not None and (forward.rule, forward.step) == (
        "pending_step_rewired", "charge")
    assert report[None].ok  # a finished run only rolls back
    assert report["reserve"].forward is not None  # charge has not run there either
    with pytest.raises(AssertionError, match="pending_step_rewired"):
        assert_can_continue(v1, v2, at=["charge"])


def test_a_lost_undo_fails_the_rollback_check_only_when_asked() -> None:
    v1 = _shop()
    v2 = _shop(undo=False)
    with pytest.raises(AssertionError, match="undo_removed"):
        assert_can_continue(v1, v2)
    report = compatibility_report(v1, v2)
    assert report[1].rollback is not None and report[1].rollback.rule == "undo_removed"


def test_bad_arguments_are_refused() -> None:
    v1 = _shop()
    with pytest.raises(ValueError, match="'nowhere' is not a step"):
        assert_can_continue(v1, v1, at=["nowhere"])
    with pytest.raises(TypeError, match="Reactor class"):
        compatibility_report(object(), v1)
    with pytest.raises(MigrationArgumentError) as refused:
        compatibility_report(v1, _shop("hold_stock"), renames={"reserve": "nowhere"})
    assert refused.value.field == "renames"


def _deploys_example() -> str:
    text = (ROOT / "docs" / "deploys.md").read_text(encoding="utf-8")
    section = text[text.index("## Testing a new definition"):]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "docs/deploys.md has no example under 'Testing a new definition'"
    return match.group(1)


def test_the_deploys_example_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "check_deploy.py"
    script.write_text(_deploys_example(), encoding="utf-8")
    done = subprocess.run([sys.executable, "-W", "error", str(script)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_deploys_example_is_lint_clean() -> None:
    ruff = Path(sys.executable).parent / "ruff"
    assert ruff.exists(), f"ruff is part of the dev extra; not found at {ruff}"
    done = subprocess.run(
        [str(ruff), "check", "--stdin-filename", str(ROOT / "check_deploy.py"), "-"],
        input=_deploys_example(), capture_output=True, text=True, cwd=ROOT, timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
