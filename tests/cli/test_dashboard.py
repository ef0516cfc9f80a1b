"""``reactor dashboard`` (docs/dashboard.md, "Running it"): its options reach the server, a
bad token is a usage error, and a non-loopback bind is warned about."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import cli, config
from reactor.dashboard import server as server_module

runner = CliRunner()


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    config.reset()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Records what ``reactor dashboard`` would serve instead of serving it."""
    calls: list[dict[str, Any]] = []

    def record(runtime: Any, **options: Any) -> None:
        calls.append({"runtime": runtime, **options})

    monkeypatch.setattr(server_module, "serve", record)
    return calls


def test_the_options_reach_the_server(served: list[dict[str, Any]]) -> None:
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", "--router",
                                  "local://", "--port", "9123", "--token", "a-long-token"])
    assert out.exit_code == 0, out.output
    (call,) = served
    assert (call["host"], call["port"], call["token"], call["read_only"]) == (
        "127.0.0.1", 9123, "a-long-token", None)
    assert call["runtime"] is config.current()
    assert "actions enabled" in out.output


def test_without_a_token_it_is_read_only(served: list[dict[str, Any]],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTOR_DASHBOARD_TOKEN", raising=False)
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://"])
    assert out.exit_code == 0, out.output
    assert served[0]["token"] is None and "(read-only)" in out.output
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", "--token",
                                  "a-long-token", "--read-only"])
    assert served[1]["read_only"] is True and "(read-only)" in out.output


def test_a_bad_token_is_a_usage_error(served: list[dict[str, Any]]) -> None:
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", "--token", "short"])
    assert out.exit_code == 2 and "at least 8 characters" in out.output
    assert served == []


def test_binding_beyond_this_host_is_warned_about(served: list[dict[str, Any]]) -> None:
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", "--host", "0.0.0.0"])
    assert out.exit_code == 0, out.output
    assert "reads need no token" in " ".join(out.output.split())


def test_the_token_comes_from_a_file_or_the_environment(
    served: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("REACTOR_DASHBOARD_TOKEN", raising=False)
    path = tmp_path / "token"
    path.write_text("a-token-from-a-file\n", encoding="utf-8")
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", "--token-file",
                                  str(path)])
    assert out.exit_code == 0, out.output
    assert served[-1]["token"] == "a-token-from-a-file" and "warning" not in out.output
    assert "a-token-from-a-file" not in out.output

    monkeypatch.setenv("REACTOR_DASHBOARD_TOKEN", "a-token-from-the-env")
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://"])
    assert out.exit_code == 0, out.output
    assert served[-1]["token"] == "a-token-from-the-env" and "warning" not in out.output


def test_a_token_on_the_command_line_is_warned_about(served: list[dict[str, Any]]) -> None:
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", "--token",
                                  "a-long-token"])
    assert out.exit_code == 0, out.output
    assert "--token-file" in " ".join(out.output.split())
    assert "a-long-token" not in out.output


def test_token_file_errors_are_usage_errors(
    served: list[dict[str, Any]], tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    for args, message in (
        (["--token-file", str(tmp_path / "missing")], "cannot read it"),
        (["--token-file", str(empty)], "the file is empty"),
        (["--token-file", str(empty), "--token", "a-long-token"], "not both"),
    ):
        out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", *args])
        assert out.exit_code == 2 and message in " ".join(out.output.split()), out.output
    assert served == []


def test_allowed_hosts_and_session_lifetimes_reach_the_server(
    served: list[dict[str, Any]]
) -> None:
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", "--allowed-host",
                                  "dash.example.com", "--allowed-host", "*.ops.example",
                                  "--session-idle", "60", "--session-max-age", "600"])
    assert out.exit_code == 0, out.output
    (call,) = served
    assert call["hosts"] == ("dash.example.com", "*.ops.example")
    assert (call["sessions"].idle_seconds, call["sessions"].max_age_seconds) == (60, 600)
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", "--allowed-host",
                                  "bad host/x"])
    assert out.exit_code == 2 and "allowed host" in out.output


def test_a_wildcard_bind_without_allowed_hosts_is_warned_about(
    served: list[dict[str, Any]]
) -> None:
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", "--host", "0.0.0.0"])
    assert out.exit_code == 0 and "--allowed-host" in " ".join(out.output.split())
    out = runner.invoke(cli.app, ["dashboard", "--storage", "memory://", "--host", "0.0.0.0",
                                  "--allowed-host", "dash.example.com"])
    assert "--allowed-host" not in " ".join(out.output.split())
