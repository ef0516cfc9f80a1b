"""``reactor runs list`` and ``reactor runs show``: filters, ``--json``, full ids when piped,
errors on stderr with exit codes, secrets masked (reactor/cli/runs.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import Input, Reactor, config, input, step
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.cli.runs import parse_since
from reactor.config import Runtime
from reactor.memory import InlineRouter, ManualClock, MemoryStorage

SECRET = "tok_visa_SECRET_4242"
NOW = 1_700_000_000.0


class Paying(Reactor, name="test_cli_runs.paying"):
    card_token = Input(str, redact=True)
    fail = Input(bool, default=False)

    @step(card_token=input("card_token"), fail=input("fail"))
    def charge(inputs: Any, ctx: Any) -> str:
        if inputs.fail:
            raise RuntimeError("declined")
        return "ok"


class Other(Reactor, name="test_cli_runs.other"):
    @step()
    def noop(inputs: Any, ctx: Any) -> int:
        return 1


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def rt(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    runtime = config.configure(storage=MemoryStorage(clock=clock), router=InlineRouter())
    monkeypatch.setattr(runs_cli, "_runtime", lambda storage, router, setting=None: runtime)
    yield runtime
    config.reset()


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["runs", *args])


def _runs(clock: ManualClock) -> dict[str, str]:
    """Four runs, 10 minutes apart: paying ok, paying failed, other, paying ok (newest)."""
    ids = {}
    ids["old_ok"] = Paying.run(card_token=SECRET).run_id
    clock.advance(600)
    ids["failed"] = Paying.run(card_token=SECRET, fail=True).run_id
    clock.advance(600)
    ids["other"] = Other.run().run_id
    clock.advance(600)
    ids["new_ok"] = Paying.run(card_token=SECRET).run_id
    return {k: str(v) for k, v in ids.items()}


def test_runs_list_filters_by_status_reactor_and_since(rt: Runtime, clock: ManualClock) -> None:
    ids = _runs(clock)

    def listed(*args: str) -> list[str]:
        out = _invoke("list", "--json", *args)
        assert out.exit_code == 0, out.output
        return [row["run_id"] for row in json.loads(out.stdout)["runs"]]

    assert listed() == [ids["new_ok"], ids["other"], ids["failed"], ids["old_ok"]]
    assert listed("--status", "failed") == [ids["failed"]]
    assert listed("--status", "completed,failed", "--reactor", "test_cli_runs.paying") == [
        ids["new_ok"], ids["failed"], ids["old_ok"]]
    assert listed("--reactor", "test_cli_runs.other") == [ids["other"]]
    assert listed("--since", "1970-01-01") == listed()
    # created at NOW, +600, +1200, +1800: since NOW + 800 lists the two newest
    assert listed("--since", _iso(NOW + 800)) == [ids["new_ok"], ids["other"]]
    assert listed("--since", "15m") == []  # ages count back from the wall clock (2023 is old)


def _iso(epoch: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(epoch, tz=UTC).isoformat()


def test_runs_list_pages_exactly_with_limit_and_cursor(rt: Runtime, clock: ManualClock) -> None:
    ids = _runs(clock)
    first = json.loads(_invoke("list", "--json", "--limit", "1", "--reactor",
                               "test_cli_runs.paying").stdout)
    assert [r["run_id"] for r in first["runs"]] == [ids["new_ok"]]
    second = json.loads(_invoke("list", "--json", "--limit", "2", "--reactor",
                                "test_cli_runs.paying", "--cursor", first["next_cursor"]).stdout)
    assert [r["run_id"] for r in second["runs"]] == [ids["failed"], ids["old_ok"]]


def test_runs_list_prints_full_ids_when_piped(rt: Runtime, clock: ManualClock) -> None:
    ids = _runs(clock)
    out = _invoke("list")
    assert out.exit_code == 0
    lines = out.stdout.splitlines()
    assert lines[0].split("\t") == ["RUN_ID", "REACTOR", "STATUS", "CREATED", "UPDATED"]
    assert [line.split("\t")[0] for line in lines[1:]] == [
        ids["new_ok"], ids["other"], ids["failed"], ids["old_ok"]]
    assert SECRET not in out.output


def test_runs_list_reports_bad_options_on_stderr_with_exit_2(rt: Runtime) -> None:
    out = _invoke("list", "--status", "nope")
    assert out.exit_code == 2 and "unknown --status 'nope'" in out.stderr and out.stdout == ""
    out = _invoke("list", "--since", "yesterday-ish")
    assert out.exit_code == 2 and "--since" in out.stderr and out.stdout == ""
    out = _invoke("list", "--cursor", "garbage!")
    assert out.exit_code == 2 and "bad cursor" in out.stderr


def test_runs_show_masks_secrets_and_has_a_json_mode(rt: Runtime, clock: ManualClock) -> None:
    ids = _runs(clock)
    out = _invoke("show", ids["failed"], "--json")
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert shown["context_id"] == ids["failed"] and shown["status"] == "failed"
    assert shown["document"]["inputs"]["card_token"] == "[REDACTED]"
    assert SECRET not in out.output
    pretty = _invoke("show", ids["old_ok"])
    assert pretty.exit_code == 0 and SECRET not in pretty.output
    undo = json.loads(_invoke("show", ids["old_ok"], "--json").stdout)["document"]["undo_stack"]
    assert undo[0]["arguments"]["card_token"] == "[REDACTED]"


def test_runs_show_of_an_unknown_run_is_an_error_on_stderr_with_exit_1(rt: Runtime) -> None:
    out = _invoke("show", "no-such-run")
    assert out.exit_code == 1
    assert "no run 'no-such-run'" in out.stderr and out.stdout == ""


def test_parse_since_reads_ages_and_iso_times() -> None:
    assert parse_since("90", now=1000.0) == 910.0
    assert parse_since("2h", now=10_000.0) == 10_000.0 - 7200
    assert parse_since("1d", now=100_000.0) == 100_000.0 - 86400
    assert parse_since("1970-01-02") == 86400.0
    assert parse_since("1970-01-01T01:00:00+01:00") == 0.0
    with pytest.raises(ValueError, match="--since"):
        parse_since("soon")
