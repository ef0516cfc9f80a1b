"""The ``reactor`` command line: ``worker`` and ``sweep`` options, help (docs/workers.md,
"Running workers")."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reactor import cli, config
from reactor.jobs import async_slots
from reactor.jobs import worker as worker_module

runner = CliRunner()


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    config.reset()


def test_sweep_once_prints_counts_and_takes_settings() -> None:
    out = runner.invoke(
        cli.app, ["sweep", "--storage", "memory://", "--router", "local://",
                  "--setting", "sweeper_limit=5"],
    )
    assert out.exit_code == 0, out.output
    assert "runs: inspected=0 redispatched=0 waiting=0 errors=0" in out.output
    assert config.current().settings.sweeper_limit == 5


def test_bad_settings_exit_2() -> None:
    out = runner.invoke(cli.app, ["sweep", "--storage", "memory://", "--setting", "oops"])
    assert out.exit_code == 2 and "expected KEY=VALUE" in out.output
    out = runner.invoke(
        cli.app, ["sweep", "--storage", "memory://", "--setting", "context_lock_ttl=-1"]
    )
    assert out.exit_code == 2 and "context_lock_ttl" in out.output


def test_worker_builds_a_worker_from_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def serve(self: worker_module.Worker, *, install_signals: bool = True) -> int:
        seen.update(threads=self.threads, modules=self.import_modules, sweep=self.sweep,
                    ttl=self.runtime.settings.context_lock_ttl, drain=self.drain_timeout)
        return 0

    monkeypatch.setattr(worker_module.Worker, "serve", serve)
    out = runner.invoke(
        cli.app,
        ["worker", "--storage", "memory://", "--router", "local://", "--threads", "3",
         "--import", "tests.kill.reactors", "--sweep", "-s", "context_lock_ttl=2",
         "--drain-timeout", "7"],
    )
    assert out.exit_code == 0, out.output
    assert seen == {"threads": 3, "modules": ("tests.kill.reactors",), "sweep": True,
                    "ttl": 2.0, "drain": 7.0}


def test_worker_async_slots_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--async-slots N`` (docs/workers.md, "Async slots"): passed to the worker; without the
    greenlet package, one error line and exit 2."""
    seen: dict[str, object] = {}

    def serve(self: worker_module.Worker, *, install_signals: bool = True) -> int:
        seen.update(slots=self.async_slots)
        return 0

    monkeypatch.setattr(worker_module.Worker, "serve", serve)
    args = ["worker", "--storage", "memory://", "--router", "local://"]
    out = runner.invoke(cli.app, [*args, "--async-slots", "50"])
    assert out.exit_code == 0, out.output
    assert seen == {"slots": 50}
    assert runner.invoke(cli.app, [*args, "--async-slots", "-1"]).exit_code == 2

    def missing() -> object:
        raise ImportError("No module named 'greenlet'")

    monkeypatch.setattr(async_slots, "_greenlet_module", missing)
    out = runner.invoke(cli.app, [*args, "--async-slots", "50"])
    assert out.exit_code == 2 and "reactor-saga[async-slots]" in out.output, out.output


def test_adapter_commands_are_mounted_from_entry_points() -> None:
    from typer.testing import CliRunner

    from reactor.cli import app, mount_plugins

    assert "dynamodb" in mount_plugins()
    assert mount_plugins().count("dynamodb") == 1  # idempotent
    outcome = CliRunner().invoke(app, ["dynamodb", "--help"])
    assert outcome.exit_code == 0
    assert "create-table" in outcome.output


def test_worker_import_failure_is_one_error_line_and_exit_2() -> None:
    out = runner.invoke(
        cli.app, ["worker", "--storage", "memory://", "--import", "no_such_module_for_reactor"]
    )
    assert out.exit_code == 2
    assert "cannot import --import 'no_such_module_for_reactor'" in out.output
    assert "Traceback" not in out.output


def test_worker_imports_modules_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "reactor_cli_cwd_module.py").write_text("LOADED = True\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "reactor_cli_cwd_module", raising=False)
    monkeypatch.setattr(worker_module.Worker, "serve", lambda self, **_: 0)
    out = runner.invoke(
        cli.app, ["worker", "--storage", "memory://", "--import", "reactor_cli_cwd_module"]
    )
    assert out.exit_code == 0, out.output
    assert sys.modules["reactor_cli_cwd_module"].LOADED is True
    sys.modules.pop("reactor_cli_cwd_module", None)


@pytest.mark.parametrize("args", [["sweep"], ["runs", "list"], ["runs", "show", "x"]])
def test_commands_without_a_storage_warn_that_the_store_is_empty(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    out = runner.invoke(cli.app, args)
    assert "warning: no --storage and no REACTOR_STORAGE_URL" in out.stderr
    assert "--storage URL" in out.stderr


def test_an_explicit_or_environment_storage_does_not_warn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    assert "warning" not in runner.invoke(cli.app, ["sweep", "--storage", "memory://"]).stderr
    monkeypatch.setenv("REACTOR_STORAGE_URL", "memory://")
    assert "warning" not in runner.invoke(cli.app, ["sweep"]).stderr


def test_contract_rejects_a_bad_url_before_running_pytest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import reactor_contract.cli as contract_cli

    def no_pytest(args: object) -> int:
        raise AssertionError("pytest must not run for a bad URL")

    monkeypatch.setattr(contract_cli.pytest, "main", no_pytest)
    out = runner.invoke(cli.app, ["contract", "--storage", "nosuch://"])
    assert out.exit_code == 2
    assert "bad storage URL 'nosuch://'" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    out = runner.invoke(cli.app, ["contract", "--storage", "memory://", "--router",
                                  "local://?bogus=1"])
    assert out.exit_code == 2 and "bad router URL" in out.stderr


def test_help_shows_one_line_per_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer.rich_utils

    # typer sizes its rich help from TERMINAL_WIDTH read at import, not from terminal_width
    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", 200)
    out = runner.invoke(cli.app, ["--help"], terminal_width=200)
    assert "Run the run, step and map sweepers once and print their counts." in out.output
    for command in ("worker", "sweep", "runs", "contract", "info", "ping", "--version"):
        assert f" {command} " in out.output, command


@pytest.mark.parametrize("where", ["flag", "env"])
def test_worker_with_a_router_but_no_storage_refuses_to_start(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    monkeypatch.delenv("REACTOR_ROUTER_URL", raising=False)
    started: list[bool] = []

    def serve(self: worker_module.Worker, *, install_signals: bool = True) -> int:
        started.append(True)
        return 0

    monkeypatch.setattr(worker_module.Worker, "serve", serve)
    args = ["worker"]
    if where == "flag":
        args += ["--router", "redis://user:secret@127.0.0.1:1/0"]
    else:
        monkeypatch.setenv("REACTOR_ROUTER_URL", "redis://user:secret@127.0.0.1:1/0")
    out = runner.invoke(cli.app, args)
    assert out.exit_code == 2
    assert started == []
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "a router is configured (redis://...) but no storage" in lines[0]
    assert "--storage URL or set REACTOR_STORAGE_URL" in lines[0]
    assert "secret" not in out.output
    # with a storage from the environment the same worker starts
    monkeypatch.setenv("REACTOR_STORAGE_URL", "memory://")
    out = runner.invoke(cli.app, args)
    assert out.exit_code == 0, out.output
    assert started == [True]


def test_sweep_imports_the_reactor_modules_like_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resuming a lost fan-out batch runs reactor code in the sweeping process: `reactor sweep`
    takes --import like the worker, so the reactors are registered there."""
    name = f"sweep_import_probe_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("IMPORTED = True\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command puts the cwd first
    monkeypatch.delitem(sys.modules, name, raising=False)
    out = runner.invoke(
        cli.app, ["sweep", "--storage", "memory://", "--router", "local://", "--import", name],
    )
    assert out.exit_code == 0, out.output
    assert getattr(sys.modules.get(name), "IMPORTED", False) is True
    sys.modules.pop(name, None)
    out = runner.invoke(
        cli.app, ["sweep", "--storage", "memory://", "--import", "no_such_module_here"],
    )
    assert out.exit_code == 2


def test_sweep_every_gives_the_process_its_own_signal_handlers_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``reactor sweep --every`` stops on SIGTERM/SIGINT through handlers of its own while it
    loops; once it returns, the handlers the process had before are back."""
    import signal

    from reactor.cli import sweep as sweep_module

    mine = {sig: (lambda signum, frame: None) for sig in (signal.SIGTERM, signal.SIGINT)}
    before = {sig: signal.signal(sig, handler) for sig, handler in mine.items()}
    real = sweep_module.run_sweeps

    def once_then_stop(*args: object, **kwargs: object) -> object:
        counts = real(*args, **kwargs)  # type: ignore[arg-type]
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # the loop's own handler
        return counts

    monkeypatch.setattr(sweep_module, "run_sweeps", once_then_stop)
    try:
        out = runner.invoke(cli.app, ["sweep", "--storage", "memory://", "--router",
                                      "local://", "--every", "0.1"])
        assert out.exit_code == 0, out.output
        assert "runs: inspected=" in out.output
        assert {sig: signal.getsignal(sig) for sig in mine} == mine
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
