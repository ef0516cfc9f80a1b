"""The ``reactor`` command line: ``worker`` and ``sweep`` options (issue 7 items 1 and 5)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from reactor import cli, config
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
    assert "runs: inspected=0 redispatched=0 errors=0" in out.output
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


def test_adapter_commands_are_mounted_from_entry_points() -> None:
    from typer.testing import CliRunner

    from reactor.cli import app, mount_plugins

    assert "dynamodb" in mount_plugins()
    assert mount_plugins().count("dynamodb") == 1  # idempotent
    outcome = CliRunner().invoke(app, ["dynamodb", "--help"])
    assert outcome.exit_code == 0
    assert "create-table" in outcome.output
