"""The README's example runs as written and prints what the README says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _first_python_block(text: str) -> str:
    match = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert match, "README has no python example"
    return match.group(1)


def test_readme_starts_with_the_two_commands() -> None:
    commands = re.findall(r"^\./scripts/[a-z]+", README.read_text(), re.MULTILINE)
    assert commands[:2] == ["./scripts/demo", "./scripts/test"]


def test_readme_example_runs_and_rolls_back(tmp_path: Path) -> None:
    script = tmp_path / "payment.py"
    script.write_text(_first_python_block(README.read_text()))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False capture ['auth-1']", "failed"]
