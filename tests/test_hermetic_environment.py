"""The suite is hermetic: a user's ``REACTOR_*`` configuration never reaches a test
(docs/testing.md, "Running reactor's own suite").

reactor reads ``REACTOR_STORAGE_URL``, ``REACTOR_ROUTER_URL``, ``REACTOR_SECRET_KEYS``,
``REACTOR_MIDDLEWARE`` and ``REACTOR_<SETTING>`` (docs/workers.md, "Running workers"). Both
``scripts/test`` (in shell, before it runs anything) and ``tests/conftest.py`` (before any test
module is imported) remove every such variable but the suite's own knobs (``REACTOR_TEST_*`` and
``tests.services.SUITE_VARIABLES``). Checked here: the cleaning itself, the shell block of
``scripts/test``, and a representative subset of the suite run in a pytest process whose
environment holds hostile values of every kind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.services import SUITE_VARIABLES, clear_user_configuration, is_suite_variable

ROOT = Path(__file__).resolve().parent.parent

#: A developer's shell at its worst: every kind of reactor configuration, each value one that
#: breaks a test that reads it (an unreachable server, a key that does not parse, an unknown
#: middleware, a TTL of a millisecond, a setting out of range).
HOSTILE: dict[str, str] = {
    "REACTOR_STORAGE_URL": "redis://127.0.0.1:9/0?prefix=hostile",
    "REACTOR_ROUTER_URL": "sqs://hostile?region=us-east-1&endpoint_url=http://127.0.0.1:9",
    "REACTOR_SECRET_KEYS": "hostile:not-a-key",
    "REACTOR_MIDDLEWARE": "no_such_middleware",
    "REACTOR_CONTEXT_TTL": "0.001",
    "REACTOR_CONTEXT_LOCK_TTL": "1",
    "REACTOR_SWEEPER_INTERVAL": "-1",
    "REACTOR_LOCK_SNOOZE_MAX_ATTEMPTS": "0",
    "REACTOR_DASHBOARD_TOKEN": "hostile",
    "REACTOR_MUTANTS_IMPORT_DELAY": "30",
}

#: The suite's own knobs, which stay.
KEPT: dict[str, str] = {"REACTOR_TEST_EXAMPLE_KNOB": "1"} | {
    name: "kept" for name in SUITE_VARIABLES
}

#: Tests whose outcome depends on reactor's configuration, run under :data:`HOSTILE`: the
#: probe below, the environment-reading config, the secret keys (a test failed here when
#: ``REACTOR_SECRET_KEYS`` was set), the CLI and a worker built from the environment.
SUBSET = (
    "tests/test_hermetic_environment.py::test_no_user_configuration_reaches_a_test",
    "tests/test_config.py",
    "tests/model/test_secrets.py",
    "tests/jobs/test_worker_secrets.py",
    "tests/engine/test_secrets_at_rest.py",
    "tests/cli/test_app.py",
)


def _reactor_names(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    return sorted(name for name in environ if name.startswith("REACTOR_"))


def test_clear_user_configuration_keeps_only_the_suites_knobs() -> None:
    environ = {**HOSTILE, **KEPT, "PATH": "/bin", "XREACTOR_STORAGE_URL": "kept",
               "REACTOR_A-B": "not an identifier, removed all the same"}
    removed = clear_user_configuration(environ)
    assert removed == sorted([*HOSTILE, "REACTOR_A-B"])
    assert environ == {**KEPT, "PATH": "/bin", "XREACTOR_STORAGE_URL": "kept"}
    assert clear_user_configuration(environ) == []  # idempotent
    assert all(is_suite_variable(name) for name in KEPT)
    assert not any(is_suite_variable(name) for name in HOSTILE)


def test_no_user_configuration_reaches_a_test() -> None:
    """No test, and no process a test starts, sees a ``REACTOR_*`` variable but the suite's."""
    assert [n for n in _reactor_names(os.environ) if not is_suite_variable(n)] == []
    child = subprocess.run(
        [sys.executable, "-c",
         "import json, os; print(json.dumps(sorted(k for k in os.environ"
         " if k.startswith('REACTOR_'))))"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    assert [n for n in json.loads(child.stdout) if not is_suite_variable(n)] == []


def _hermetic_block() -> str:
    """The environment-cleaning block at the top of ``scripts/test``."""
    text = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    start = text.index("# ---- hermetic environment")
    end = text.index("# ---- end of hermetic environment")
    return text[start:end]


def test_scripts_test_removes_the_same_variables_before_anything_runs() -> None:
    block = _hermetic_block()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **HOSTILE, **KEPT}
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{block}\nenv -0"],
        env=env, capture_output=True, check=True, timeout=60,
    )
    names = [entry.split(b"=", 1)[0].decode() for entry in done.stdout.split(b"\0") if entry]
    assert sorted(n for n in names if n.startswith("REACTOR_")) == sorted(KEPT)
    text = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert text.index("# ---- end of hermetic environment") < text.index("source scripts/")


def test_a_subset_of_the_suite_passes_with_hostile_reactor_variables(tmp_path: Path) -> None:
    env = {**os.environ, **HOSTILE}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not soak",
         f"--basetemp={tmp_path / 'run'}", *SUBSET],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout, done.stdout[-2000:]
