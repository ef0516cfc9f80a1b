"""The README's example runs as written, prints what the README says it prints, and saved where
the README says (or even inside the checkout) leaves ``./scripts/test`` green."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


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


def test_readme_says_to_save_the_example_outside_the_checkout() -> None:
    text = README.read_text()
    intro = text[text.index("## A saga in 30 lines"):text.index("```python")]
    saved = re.search(r"[Ss]ave it \*\*outside the checkout\*\*, e\.g\. as `([^`]+)`", intro)
    assert saved, intro
    path = Path(saved.group(1))
    assert path.is_absolute() and ROOT not in path.parents, path
    assert f"python {path}" in " ".join(intro.split())  # the run command uses the same path


def test_readme_example_is_lint_clean_even_inside_the_checkout() -> None:
    """``./scripts/test`` runs ``ruff check .``: the example, linted with the project's
    configuration as if saved as ``payment.py`` at the root, has nothing to report."""
    ruff = Path(sys.executable).parent / "ruff"
    assert ruff.exists(), f"ruff is part of the dev extra; not found at {ruff}"
    done = subprocess.run(
        [str(ruff), "check", "--stdin-filename", str(ROOT / "payment.py"), "-"],
        input=_first_python_block(README.read_text()), capture_output=True, text=True,
        cwd=ROOT, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_readme_names_the_distribution_and_a_checkout_install() -> None:
    text = " ".join(README.read_text().split())
    assert "The distribution is named `reactor-saga`" in text
    assert "not published on PyPI yet" in text
    assert "pip install -e '.[redis]'" in text
    assert "pip install -e '.[contract]'" in text


def test_the_contract_extra_installs_what_the_suite_runs_on() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["contract"]
    assert sorted(re.split(r"[<>=!~ ]", dep)[0] for dep in extra) == ["hypothesis", "pytest"]
    doc = " ".join((ROOT / "docs" / "contract-suite.md").read_text().split())
    assert "pip install 'reactor-saga[contract]'" in doc or "pip install -e '.[contract]'" in doc


def test_readme_masking_claim_matches_the_security_page() -> None:
    """The dashboard masks redacted values, not every value: exception messages are shown as
    raised (docs/security.md, "What each view shows")."""
    text = " ".join(README.read_text().split())
    assert "every value masked" not in text
    assert "redacted values are masked" in text
    assert 'docs/security.md, "What each view shows"' in text
    security = " ".join((ROOT / "docs" / "security.md").read_text().split())
    assert "**as raised**: not masked" in security
