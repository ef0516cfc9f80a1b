"""``reactor runs versions``, ``reactor runs migrate``, ``reactor runs resume-version`` and
``--import`` of a retained old definition (reactor/cli/deploys.py; docs/deploys.md,
"Operator tools").

Release ``v1`` of reactor :data:`NAME` declares ``reserve`` then ``charge``; release ``v2``
renamed ``reserve`` to ``hold_stock``. tests/cli/retained_shop_v1.py keeps v1 as a retained
definition.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import Background, DispatchHandle, Reactor, config, registry
from reactor.cli import deploys as deploys_cli
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.coordination import Lock
from reactor.dsl import Input, input, result, step
from reactor.dsl.fingerprint import definition_id
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.jobs.worker import Worker
from reactor.model.keys import run_liveness_key
from reactor.model.status import RunStatus
from reactor.testing import TestClock
from tests.backends import BACKENDS, configure_on

NAME = "tests.cli.deploys.shop"
RETAINED = "tests.cli.retained_shop_v1"


def _forget_retained() -> None:
    """As if the retained module had never been imported in this process."""
    module = sys.modules.pop(RETAINED, None)
    if module is not None:
        registry.unregister_retained(NAME, definition_id(module.ShopV1.definition).fingerprint)


def _use(monkeypatch: pytest.MonkeyPatch, runtime: Runtime) -> None:
    for module in (deploys_cli, runs_cli):
        monkeypatch.setattr(module, "_runtime",
                            lambda storage, router, setting=None: runtime)


@pytest.fixture
def rt(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    """A memory runtime on a test clock, used by the commands."""
    registry.unregister(NAME)
    _forget_retained()
    runtime = configure_on("memory", lambda name: "", TestClock(time.time()), area="deploys")
    _use(monkeypatch, runtime)
    yield runtime
    config.reset()
    registry.unregister(NAME)
    _forget_retained()


@pytest.fixture(params=BACKENDS)
def any_rt(
    request: pytest.FixtureRequest, service_url: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Runtime]:
    """A runtime on every backend (a fresh namespace), used by the commands."""
    registry.unregister(NAME)
    runtime = configure_on(request.param, service_url, TestClock(time.time()), area="deploys")
    _use(monkeypatch, runtime)
    yield runtime
    config.reset()
    registry.unregister(NAME)


def _shop(events: list[str], release: str, *, worker: bool = False) -> type[Reactor]:
    """Release ``v1`` or ``v2`` of :data:`NAME`, registered as the current one."""
    first = "reserve" if release == "v1" else "hold_stock"
    registry.unregister(NAME)

    def hold(inputs: Any, ctx: Any) -> str:
        events.append(first)
        return f"r-{inputs.order}"

    def unhold(result: Any, inputs: Any, ctx: Any) -> None:
        events.append(f"undo {first} {result}")

    class Shop(Reactor, name=NAME):
        version = release
        background = Background(before="charge") if worker else None
        order = Input(str)
        locals()[first] = step(order=input("order"))(hold)
        locals()[first].undo(unhold)

        @step(reservation=result(first))
        def charge(inputs: Any, ctx: Any) -> str:
            events.append(f"charge {inputs.reservation}")
            return "ch-1"

        @charge.undo
        def refund(result: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"refund {result}")

    return Shop


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["runs", *args])


def _stored(runtime: Runtime, run_id: str) -> Any:
    ctx = load_context(make_env(runtime), run_id, open_secrets=False)
    assert ctx is not None
    return ctx


def _completed(shop: type[Reactor], order: str) -> str:
    run_id = shop.run(order=order).run_id
    assert run_id is not None
    return run_id


# ------------------------------------------------------------------ runs versions


def test_versions_counts_runs_by_definition_and_status_on_every_backend(
    any_rt: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    v1 = _shop(events, "v1")
    first = [_completed(v1, f"o-{n}") for n in range(3)]
    v1.undo(first[0])  # cancelled
    v2 = _shop(events, "v2")
    _completed(v2, "o-9")
    monkeypatch.setattr(deploys_cli, "PAGE_SIZE", 2)  # several pages
    out = _invoke("versions", "--json", "--reactor", NAME)
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    fp1, fp2 = (definition_id(v.definition).fingerprint for v in (v1, v2))
    assert shown["runs"] == 4
    assert sorted((r["version"], r["fingerprint"], r["status"], r["count"], r["current"])
                  for r in shown["versions"]) == [
        ("v1", fp1, "cancelled", 1, False), ("v1", fp1, "completed", 2, False),
        ("v2", fp2, "completed", 1, True),
    ]
    table = _invoke("versions", "--reactor", NAME)  # piped: tab-separated
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0] == "REACTOR\tVERSION\tFINGERPRINT\tSTATUS\tRUNS\tCURRENT"
    assert f"{NAME}\tv2\t{fp2}\tcompleted\t1\tcurrent" in lines


def test_versions_shows_runs_stored_before_fingerprints(rt: Runtime) -> None:
    events: list[str] = []
    run_id = _completed(_shop(events, "v1"), "o-1")
    ctx = _stored(rt, run_id)
    from dataclasses import replace

    from reactor.engine.checkpoint import Checkpointer
    ctx.engine_state = replace(ctx.engine_state, definition=None)
    Checkpointer(make_env(rt), ctx).save()
    out = _invoke("versions", "--json")
    assert out.exit_code == 0, out.output
    assert [(r["fingerprint"], r["version"], r["count"]) for r in json.loads(out.stdout)[
        "versions"] if r["reactor"] == NAME] == [("-", None, 1)]


def test_versions_refuses_an_empty_reactor(rt: Runtime) -> None:
    out = _invoke("versions", "--reactor", " ")
    assert out.exit_code == 2 and "--reactor" in out.stderr


# ------------------------------------------------------------------ runs migrate


def test_migrate_all_renames_and_the_runs_undo_under_the_new_release_on_every_backend(
    any_rt: Runtime,
) -> None:
    events: list[str] = []
    v1 = _shop(events, "v1")
    ids = {_completed(v1, f"o-{n}") for n in range(2)}
    v2 = _shop(events, "v2")
    out = _invoke("migrate", "--all", "--reactor", NAME, "--from", "v1", "--to", "v2",
                  "--rename", "reserve=hold_stock", "--json")
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert {r["run_id"] for r in rows} == ids
    assert all(r["changed"] and r["renamed"] == {"reserve": "hold_stock"} and
               r["to"]["version"] == "v2" for r in rows)
    for run_id in ids:
        assert _stored(any_rt, run_id).engine_state.definition == definition_id(v2.definition)
    again = _invoke("migrate", "--all", "--reactor", NAME, "--rename", "reserve=hold_stock")
    assert again.exit_code == 0 and again.stdout == ""  # nothing left on v1
    events.clear()
    v2.undo(sorted(ids)[0])
    assert events == ["refund ch-1", f"undo hold_stock {_result(any_rt, sorted(ids)[0])}"]


def _result(runtime: Runtime, run_id: str) -> Any:
    return _stored(runtime, run_id).intermediate_results["hold_stock"]


def test_migrate_dry_run_prints_and_writes_nothing(rt: Runtime) -> None:
    events: list[str] = []
    run_id = _completed(_shop(events, "v1"), "o-1")
    _shop(events, "v2")
    out = _invoke("migrate", run_id, "--rename", "reserve=hold_stock", "--dry-run")
    assert out.exit_code == 0, out.output
    run, outcome, _change, status, renamed = out.stdout.strip().split("\t")
    assert (run, outcome, status, renamed) == (run_id, "would migrate", "completed",
                                               "reserve=hold_stock")
    assert list(_stored(rt, run_id).intermediate_results) == ["reserve", "charge"]


def test_migrate_refused_by_a_rule_exits_1_naming_step_and_rule(rt: Runtime) -> None:
    events: list[str] = []
    run_id = _completed(_shop(events, "v1"), "o-1")
    _shop(events, "v2")
    out = _invoke("migrate", run_id)
    assert out.exit_code == 1
    assert "step reserve" in out.stderr and "completed_step_removed" in out.stderr
    assert list(_stored(rt, run_id).intermediate_results) == ["reserve", "charge"]


def test_migrate_of_several_runs_goes_on_past_a_locked_and_a_refused_one(rt: Runtime) -> None:
    """One run locked by a live execution and one a rename cannot take are reported and
    counted (exit 1); the others are migrated. Before, the first locked run stopped the
    whole list and a bad rename of one run exited 2 untried for the rest (found by an
    outside attack)."""
    events: list[str] = []
    v1 = _shop(events, "v1")
    locked, plain, last = (_completed(v1, f"o-{n}") for n in range(3))
    unknown = "not-a-run"
    _shop(events, "v2")
    holder = Lock(rt.storage.locks, run_liveness_key(locked), ttl=60, auto_extend=False)
    assert holder.try_acquire()
    try:
        out = _invoke("migrate", locked, unknown, plain, last, "--rename", "reserve=hold_stock")
    finally:
        holder.release()
    assert out.exit_code == 1, out.output
    migrated = [line.split("\t")[0] for line in out.stdout.strip().splitlines()]
    assert migrated == [plain, last]
    assert locked in out.stderr and unknown in out.stderr and "2 run(s) not migrated" in out.stderr
    assert "hold_stock" in _stored(rt, plain).intermediate_results
    assert "reserve" in _stored(rt, locked).intermediate_results  # untouched


@pytest.mark.parametrize(("args", "words"), [
    ([], "exactly one"),
    (["RUN", "--all", "--reactor", NAME], "exactly one"),
    (["--all"], "--reactor"),
    (["RUN", "--reactor", NAME], "select runs for --all"),
    (["RUN", "--rename", "reserve"], "OLD=NEW"),
    (["RUN", "--rename", "=hold_stock"], "OLD=NEW"),
    (["RUN", "--rename", "a=b", "--rename", "a=c"], "renamed twice"),
    (["--all", "--reactor", NAME, "--status", "bogus"], "unknown --status"),
    (["RUN", "--to", " "], "--to"),
    (["--all", "--reactor", "no.such.reactor"], "--import"),
    (["RUN", "--import", "no_such_module_xyz"], "cannot import"),
])
def test_migrate_bad_options_exit_2(rt: Runtime, args: list[str], words: str) -> None:
    events: list[str] = []
    run_id = _completed(_shop(events, "v1"), "o-1")
    _shop(events, "v2")
    out = _invoke("migrate", *[run_id if a == "RUN" else a for a in args])
    assert out.exit_code == 2, out.output
    assert words in out.stderr


@pytest.mark.parametrize(("rename", "words"), [
    ("nowhere=hold_stock", "has no step 'nowhere'"),
    ("reserve=nowhere", "'nowhere' is not declared"),
])
def test_migrate_bad_renames_of_a_run_exit_2(rt: Runtime, rename: str, words: str) -> None:
    events: list[str] = []
    run_id = _completed(_shop(events, "v1"), "o-1")
    _shop(events, "v2")
    out = _invoke("migrate", run_id, "--rename", rename)
    assert out.exit_code == 2 and words in out.stderr


def test_migrate_wrong_to_version_exits_2(rt: Runtime) -> None:
    events: list[str] = []
    run_id = _completed(_shop(events, "v1"), "o-1")
    _shop(events, "v2")
    out = _invoke("migrate", run_id, "--rename", "reserve=hold_stock", "--to", "v3")
    assert out.exit_code == 2 and "'v2'" in out.stderr


# ------------------------------------------------------------------ runs resume-version


def test_resume_version_hands_a_held_run_back_once_its_definition_is_there(
    rt: Runtime,
) -> None:
    events: list[str] = []
    v1 = _shop(events, "v1", worker=True)
    handle = v1.run(order="o-1")
    assert isinstance(handle, DispatchHandle)
    _shop(events, "v2", worker=True)
    Worker(rt, liveness_wait=0.0).run_pending()
    assert _stored(rt, handle.run_id).status is RunStatus.NEEDS_VERSION
    refused = _invoke("resume-version", handle.run_id)
    assert refused.exit_code == 1 and "step reserve" in refused.stderr
    registry.unregister(NAME)
    registry.register(NAME, v1)  # the old release deployed again
    out = _invoke("resume-version", handle.run_id, "--json")
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert shown["status"] == "running" and shown["job_id"]
    Worker(rt, liveness_wait=0.0).run_pending()
    assert _stored(rt, handle.run_id).status is RunStatus.COMPLETED


def test_resume_version_of_an_unknown_reactor_asks_for_import(rt: Runtime) -> None:
    events: list[str] = []
    handle = _shop(events, "v1", worker=True).run(order="o-1")
    assert isinstance(handle, DispatchHandle)
    _shop(events, "v2", worker=True)
    Worker(rt, liveness_wait=0.0).run_pending()
    registry.unregister(NAME)
    out = _invoke("resume-version", handle.run_id)
    assert out.exit_code == 2 and "--import" in out.stderr
    done = _invoke("resume-version", _completed(_shop(events, "v1"), "o-2"))
    assert done.exit_code == 1 and "not needs_version" in done.stderr


# ------------------------------------------------------------------ --import of a retained release


def test_undo_of_a_run_whose_definition_was_removed_runs_the_retained_undos(
    rt: Runtime,
) -> None:
    events: list[str] = []
    run_id = _completed(_shop(events, "v1"), "o-1")
    _shop(events, "v2")  # the current release: reserve is gone
    refused = _invoke("undo", run_id)
    assert refused.exit_code == 1 and "completed_step_removed" in refused.stderr
    assert _stored(rt, run_id).status is RunStatus.COMPLETED
    out = _invoke("undo", run_id, "--import", RETAINED, "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["status"] == "cancelled"
    assert sys.modules[RETAINED].EFFECTS == ["retained refund ch-1", "retained release r-o-1"]
    assert registry.get(NAME).version == "v2"  # the current release is still the current one
    shown = _invoke("show", run_id, "--json", "--import", RETAINED)
    assert shown.exit_code == 0 and json.loads(shown.stdout)["status"] == "cancelled"


def test_a_retained_class_of_the_current_fingerprint_does_not_replace_the_current_one(
    rt: Runtime,
) -> None:
    """The retained module's ``ShopV1`` has the same shape as the current release (only its
    bodies differ, which the fingerprint does not cover): an operator's undo used to run the
    retained bodies for a run a worker would roll back with the current ones. The current
    class is used whenever it has the run's fingerprint."""
    events: list[str] = []
    current = _shop(events, "v1")
    run_id = _completed(current, "o-1")
    out = _invoke("undo", run_id, "--import", RETAINED, "--json")
    assert out.exit_code == 0, out.output
    assert events == ["reserve", "charge r-o-1", "refund ch-1", "undo reserve r-o-1"]
    assert sys.modules[RETAINED].EFFECTS == []
