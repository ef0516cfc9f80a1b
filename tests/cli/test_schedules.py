"""``reactor schedules add|list|pause|resume|remove`` (reactor/cli/schedules.py;
docs/schedules.md, "Managing schedules"): results on stdout, one error line on stderr, exit 1
for a missing or taken schedule and 2 for a bad value naming its field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import config
from reactor.cli import schedules as schedules_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.memory import LocalRouter, MemoryStorage
from reactor.schedules import Schedule, Scheduler, register, unregister
from reactor.testing import TestClock

START = 1_893_456_000.0  # 2030-01-01T00:00:00Z
IMPORT = ("--import", "tests.schedules.reactors")


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    clock = TestClock(START)
    runtime = config.configure(storage=MemoryStorage(clock=clock),
                               router=LocalRouter(clock=clock, workers=0), clock=clock)
    monkeypatch.setattr(schedules_cli, "_runtime", lambda storage, router, setting=None: runtime)
    yield runtime
    config.reset()


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["schedules", *args])


def _add(*extra: str) -> Any:
    return _invoke("add", "nightly", "--reactor", "tests.schedules.report", "--cron",
                   "0 2 * * *", "--timezone", "Europe/Paris", "--tick-input", "tick",
                   "--args", '{"region": "us"}', *IMPORT, *extra)


def test_add_list_pause_resume_remove(rt: Runtime) -> None:
    added = _add("--json")
    assert added.exit_code == 0, added.output
    view = json.loads(added.stdout)
    assert view["spec"] == "cron '0 2 * * *' (Europe/Paris)" and view["paused"] is False
    assert view["next_tick"] == "2030-01-01T01:00:00Z"
    listed = _invoke("list", "--json", *IMPORT)
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.stdout)["schedules"]
    assert row["name"] == "nightly" and row["source"] == "stored" and row["last_tick"] is None
    plain = _invoke("list", *IMPORT)
    assert plain.stdout.splitlines()[0] == (
        "NAME\tREACTOR\tSPEC\tPAUSED\tLAST_TICK\tLAST_RUN\tNEXT_TICK")
    assert plain.stdout.splitlines()[1].startswith("nightly\ttests.schedules.report\tcron")
    paused = _invoke("pause", "nightly")
    assert paused.exit_code == 0 and paused.stdout.startswith("nightly\tpaused\t")
    assert json.loads(_invoke("list", "--json").stdout)["schedules"][0]["paused"] is True
    resumed = _invoke("resume", "nightly", "--json")
    assert resumed.exit_code == 0 and json.loads(resumed.stdout)["paused"] is False
    removed = _invoke("remove", "nightly")
    assert removed.exit_code == 0 and removed.stdout == "nightly\tremoved\n"
    assert json.loads(_invoke("list", "--json").stdout) == {"schedules": []}


def test_list_shows_the_last_tick_and_run(rt: Runtime) -> None:
    assert _invoke("add", "often", "--reactor", "tests.schedules.report", "--every", "60",
                   "--tick-input", "tick", *IMPORT).exit_code == 0
    clock = rt.clock
    assert isinstance(clock, TestClock)
    clock.advance(60)
    (outcome,) = Scheduler(rt, schedules=[]).tick()
    (row,) = json.loads(_invoke("list", "--json").stdout)["schedules"]
    assert row["last_tick"] == "2030-01-01T00:01:00Z" and row["last_action"] == "run"
    assert row["last_run_id"] == outcome.run_id and row["last_run_status"] == "running"
    assert row["next_tick"] == "2030-01-01T00:02:00Z"


@pytest.mark.parametrize(("options", "field"), [
    (["--cron", "61 * * * *"], "cron"),
    (["--cron", "0 2 * * *", "--every", "60"], "cron"),
    ([], "cron"),
    (["--every", "0"], "every"),
    (["--every", "1.5"], "every"),
    (["--cron", "0 2 * * *", "--timezone", "Nowhere/Land"], "timezone"),
    (["--every", "60", "--catchup", "sometimes"], "catchup"),
    (["--every", "60", "--max-catchup", "0"], "max_catchup"),
    (["--every", "60", "--jitter", "-1"], "jitter"),
    (["--every", "60", "--overlap", "queue"], "overlap"),
    (["--every", "60", "--args", "[1]"], "args"),
    (["--every", "60", "--args", "{not json"], "args"),
    (["--every", "60", "--args", '{"region": 5}'], "args"),
    (["--every", "60", "--tick-input", "nope"], "tick_input"),
])
def test_add_refuses_bad_values_naming_the_field(
    rt: Runtime, options: list[str], field: str
) -> None:
    out = _invoke("add", "bad", "--reactor", "tests.schedules.report", *options,
                  *(["--tick-input", "tick"] if "--tick-input" not in options else []), *IMPORT)
    assert out.exit_code == 2, out.output
    assert out.stdout == ""
    assert f"ScheduleValueError: field '{field}'" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_add_refuses_a_bad_name_and_an_unknown_reactor(rt: Runtime) -> None:
    bad_name = _invoke("add", "has space", "--reactor", "tests.schedules.plain", "--every", "60",
                       *IMPORT)
    assert bad_name.exit_code == 2 and "field 'name'" in bad_name.stderr
    unknown = _invoke("add", "x", "--reactor", "not.imported", "--every", "60")
    assert unknown.exit_code == 2 and "field 'reactor'" in unknown.stderr
    assert "--import" in unknown.stderr


def test_a_taken_name_and_a_missing_schedule_exit_1(rt: Runtime) -> None:
    assert _add().exit_code == 0
    again = _add()
    assert again.exit_code == 1 and "ScheduleConflictError" in again.stderr
    for command in ("pause", "resume", "remove"):
        missing = _invoke(command, "ghost")
        assert missing.exit_code == 1, missing.output
        assert "ScheduleNotFoundError: no schedule named 'ghost'" in missing.stderr
    bad = _invoke("pause", "no/slash")
    assert bad.exit_code == 2 and "field 'name'" in bad.stderr


def test_a_code_schedule_can_be_paused_but_not_removed(rt: Runtime) -> None:
    from tests.schedules.reactors import Plain

    register(Schedule(Plain, every=60, name="code-one"))
    try:
        assert _invoke("pause", "code-one").exit_code == 0
        (row,) = json.loads(_invoke("list", "--json").stdout)["schedules"]
        assert row["source"] == "code" and row["paused"] is True
        refused = _invoke("remove", "code-one")
        assert refused.exit_code == 1 and "declared in code" in refused.stderr
    finally:
        unregister("code-one")


def test_a_storage_without_schedules_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    class Bare:
        """A storage without the schedules attribute (a third-party adapter)."""

        def __init__(self, inner: MemoryStorage) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            if name == "schedules":
                raise AttributeError(name)
            return getattr(self._inner, name)

    runtime = config.configure(storage=Bare(MemoryStorage()),  # type: ignore[arg-type]
                               router=LocalRouter(workers=0))
    monkeypatch.setattr(schedules_cli, "_runtime", lambda storage, router, setting=None: runtime)
    try:
        out = _add()
        assert out.exit_code == 2 and "keeps no schedules" in out.stderr
    finally:
        config.reset()
