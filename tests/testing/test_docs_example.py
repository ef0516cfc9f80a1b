"""docs/testing.md's worked example runs as written, as a user's test module would: in its
own pytest process, with the ``reactor_env`` fixture coming from the installed plugin."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "testing.md"


def _worked_example() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## A worked example"):]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "docs/testing.md has no worked example"
    return match.group(1)


def test_the_worked_example_passes_under_pytest(tmp_path: Path) -> None:
    (tmp_path / "test_checkout.py").write_text(_worked_example(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
         "--rootdir", str(tmp_path), str(tmp_path / "test_checkout.py")],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b5 passed\b", done.stdout), done.stdout


def test_the_worked_example_is_lint_clean() -> None:
    ruff = Path(sys.executable).parent / "ruff"
    assert ruff.exists(), f"ruff is part of the dev extra; not found at {ruff}"
    done = subprocess.run(
        [str(ruff), "check", "--stdin-filename", str(ROOT / "test_checkout.py"), "-"],
        input=_worked_example(), capture_output=True, text=True, cwd=ROOT, timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
