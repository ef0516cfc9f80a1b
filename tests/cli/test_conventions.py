"""CLI conventions shared by every ``reactor`` command (docs/workers.md, "Running workers"):
results on stdout, errors and warnings on stderr, exit codes 0 ok / 1 failure / 2 usage or
configuration, ``--version``, and flags that win over the environment."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version

import pytest
from typer.testing import CliRunner

from reactor import cli, config
from reactor.cli import sweep as sweep_module
from reactor.errors import ConfigurationError, StorageError
from reactor.jobs import worker as worker_module
from reactor.jobs.sweep_tick import TickCounts

runner = CliRunner()

MONGOMOCK = "mongomock://cli-precedence/reactor"


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    monkeypatch.delenv("REACTOR_ROUTER_URL", raising=False)
    for name in config.Settings.model_fields:
        monkeypatch.delenv(f"REACTOR_{name.upper()}", raising=False)
    yield
    config.reset()


def test_version_prints_the_distribution_version() -> None:
    out = runner.invoke(cli.app, ["--version"])
    assert out.exit_code == 0, out.output
    assert out.stdout.strip() == f"reactor {version('reactor-saga')}"


def test_flags_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOR_STORAGE_URL", MONGOMOCK)
    monkeypatch.setenv("REACTOR_ROUTER_URL", "inline://")
    monkeypatch.setenv("REACTOR_SWEEPER_LIMIT", "9")
    out = runner.invoke(cli.app, ["sweep", "--storage", "memory://", "--router", "local://",
                                  "-s", "sweeper_limit=5"])
    assert out.exit_code == 0, out.output
    runtime = config.current()
    assert type(runtime.storage).__name__ == "MemoryStorage"
    assert type(runtime.router).__name__ == "LocalRouter"
    assert runtime.settings.sweeper_limit == 5
    # without flags the environment applies
    out = runner.invoke(cli.app, ["sweep"])
    assert out.exit_code == 0, out.output
    runtime = config.current()
    assert type(runtime.storage).__name__ == "MongoStorage"
    assert type(runtime.router).__name__ == "InlineRouter"
    assert runtime.settings.sweeper_limit == 9


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["sweep", "--storage", "memory://", "--setting", "oops"], "expected KEY=VALUE"),
        (["sweep", "--storage", "nosuch://x"], "no reactor.storages adapter"),
        (["sweep", "--storage", "memory://", "-s", "context_lock_ttl=-1"], "context_lock_ttl"),
        (["worker", "--storage", "memory://", "--log-level", "chatty"], "bad --log-level"),
    ],
    ids=["bad-setting-pair", "bad-scheme", "bad-setting-value", "bad-log-level"],
)
def test_usage_and_configuration_errors_are_one_stderr_line_and_exit_2(
    args: list[str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module.Worker, "serve", lambda self, **_: 0)
    out = runner.invoke(cli.app, args)
    assert out.exit_code == 2, out.output
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: ") and expected in lines[0]
    assert "Traceback" not in out.output


def test_a_failed_one_shot_sweep_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        sweep_module, "run_sweeps", lambda runtime, limit: TickCounts(None, None, None)
    )
    out = runner.invoke(cli.app, ["sweep", "--storage", "memory://"])
    assert out.exit_code == 1, out.output
    assert "runs: FAILED" in out.stdout
    assert "Traceback" not in out.output  # each sweeper logged its own line (run_sweeps)


@pytest.mark.parametrize(
    ("error", "code"), [(StorageError("store down"), 1), (ConfigurationError("bad"), 2)]
)
def test_main_reports_an_unhandled_reactor_error_on_stderr(
    error: Exception, code: int, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def failing_app(**_: object) -> None:
        raise error

    monkeypatch.setattr(cli, "app", failing_app)
    monkeypatch.setattr(cli, "mount_plugins", lambda: [])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == code
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == f"error: {type(error).__name__}: {error}"


def test_contract_names_the_extra_when_hypothesis_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import reactor_contract.cli as contract_cli

    def no_pytest(args: object) -> int:
        raise AssertionError("pytest must not run without its dependencies")

    monkeypatch.setattr(contract_cli.pytest, "main", no_pytest)
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # find_spec() now reports it missing
    out = runner.invoke(cli.app, ["contract", "--storage", "memory://"])
    assert out.exit_code == 2, out.output
    assert out.stdout == ""
    line = out.stderr.strip()
    assert "hypothesis" in line and "pip install 'reactor-saga[contract]'" in line
    assert len(line.splitlines()) == 1


def test_contract_names_the_extra_when_pytest_is_missing() -> None:
    """In a fresh interpreter where neither pytest nor hypothesis can be imported."""
    code = (
        "import sys\n"
        "sys.modules['pytest'] = None\n"
        "sys.modules['hypothesis'] = None\n"
        "sys.argv = ['reactor', 'contract', '--storage', 'memory://']\n"
        "from reactor.cli import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "pytest and hypothesis, which are not installed" in done.stderr
    assert "pip install 'reactor-saga[contract]'" in done.stderr
