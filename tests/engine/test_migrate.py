"""``Reactor.migrate``: a stored run moved onto the current definition with renamed steps
(docs/deploys.md, "Operator tools"; reactor/engine/run_control/migrate.py).

Release ``v1`` of reactor :data:`NAME` declares ``reserve`` (with an undo) then ``charge``
reading its result; release ``v2`` renamed ``reserve`` to ``hold_stock``. A run started
under v1 is migrated to v2 with ``renames={"reserve": "hold_stock"}``: its records move to
the new name, it carries v2's fingerprint, and it continues (or is undone) under v2.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor import Background, DispatchHandle, Reactor, config, registry
from reactor.config import Runtime
from reactor.dsl import Input, element, input, map_step, result, step
from reactor.dsl.fingerprint import definition_id
from reactor.engine import liveness
from reactor.engine.checkpoint import load_context
from reactor.engine.env import make_env
from reactor.errors import (
    DefinitionMismatchError,
    LockAcquisitionError,
    MigrationArgumentError,
    RunStateError,
)
from reactor.jobs.worker import Worker
from reactor.model.context import Context
from reactor.model.status import RunStatus
from reactor.testing import TestClock
from tests.backends import BACKENDS, configure_on

NAME = "tests.migrate.shop"
retained_prints: list[str] = []


def _cleanup() -> None:
    registry.unregister(NAME)
    for fingerprint in retained_prints:
        registry.unregister_retained(NAME, fingerprint)
    retained_prints.clear()


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    """A runtime on memory, on a test clock."""
    _cleanup()
    yield configure_on("memory", lambda name: "", TestClock(time.time()), area="migrate")
    config.reset()
    _cleanup()


@pytest.fixture(params=BACKENDS)
def any_backend(
    request: pytest.FixtureRequest, service_url: Callable[[str], str]
) -> Iterator[Runtime]:
    """A runtime on every backend (a fresh namespace), on a test clock."""
    _cleanup()
    yield configure_on(request.param, service_url, TestClock(time.time()), area="migrate")
    config.reset()
    _cleanup()


def _shop(events: list[str], release: str, *, worker: bool = False,
          retained: bool = False) -> type[Reactor]:
    """Release ``v1`` (``reserve``) or ``v2`` (``hold_stock``) of :data:`NAME`; ``worker``:
    ``charge`` runs in a worker; ``retained``: declared ``retained=True``."""
    first = "reserve" if release == "v1" else "hold_stock"
    if not retained:
        registry.unregister(NAME)

    def hold(inputs: Any, ctx: Any) -> str:
        events.append(f"{first} {inputs.order}")
        return f"r-{inputs.order}"

    def release_hold(result: Any, inputs: Any, ctx: Any) -> None:
        events.append(f"undo {first} {result} ({release})")

    class Shop(Reactor, name=NAME, retained=retained):
        version = release
        background = Background(before="charge") if worker else None
        order = Input(str)
        locals()[first] = step(order=input("order"))(hold)
        locals()[first].undo(release_hold)

        @step(reservation=result(first))
        def charge(inputs: Any, ctx: Any) -> str:
            events.append(f"charge {inputs.reservation} ({release})")
            return "ch-1"

        @charge.undo
        def refund(result: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"refund {result} ({release})")

    if retained:
        retained_prints.append(definition_id(Shop.definition).fingerprint)
    return Shop


def _stored(runtime: Runtime, run_id: str) -> Context:
    ctx = load_context(make_env(runtime), run_id, open_secrets=False)
    assert ctx is not None
    return ctx


def _work(runtime: Runtime) -> None:
    Worker(runtime, liveness_wait=0.0).run_pending()


def _held_run(runtime: Runtime, events: list[str]) -> tuple[str, type[Reactor]]:
    """A run of v1 that completed ``reserve``, held ``needs_version`` by a v2 worker."""
    handle = _shop(events, "v1", worker=True).run(order="o-1")
    assert isinstance(handle, DispatchHandle)
    v2 = _shop(events, "v2", worker=True)
    _work(runtime)
    assert _stored(runtime, handle.run_id).status is RunStatus.NEEDS_VERSION
    return handle.run_id, v2


# --------------------------------------------------------------------- every backend


def test_a_held_run_migrated_with_its_retained_old_definition_continues(
    any_backend: Runtime,
) -> None:
    events: list[str] = []
    run_id, v2 = _held_run(any_backend, events)
    _shop(events, "v1", worker=True, retained=True)  # the old release kept importable
    done = v2.migrate(run_id, renames={"reserve": "hold_stock"}, to_version="v2")
    assert done.changed and dict(done.renamed) == {"reserve": "hold_stock"}
    assert (done.status, done.new_status) == (RunStatus.NEEDS_VERSION, RunStatus.RUNNING)
    assert done.source is not None and done.source.version == "v1"
    assert done.target == definition_id(v2.definition)
    assert done.handle is not None and done.handle.job_id
    stored = _stored(any_backend, run_id)
    assert stored.status is RunStatus.RUNNING and stored.engine_state.needs_version is None
    assert stored.engine_state.definition == definition_id(v2.definition)
    assert list(stored.intermediate_results) == ["hold_stock"]
    assert [e.step for e in stored.undo_stack] == ["hold_stock"]
    assert "reserve" not in {t.step for t in stored.execution_trace}
    _work(any_backend)
    assert _stored(any_backend, run_id).status is RunStatus.COMPLETED
    assert events == ["reserve o-1", "charge r-o-1 (v2)"]  # charge read the renamed result
    v2.undo(run_id)
    assert events[2:] == ["refund ch-1 (v2)", "undo hold_stock r-o-1 (v2)"]


def test_a_completed_run_migrated_is_undone_by_the_new_definition(
    any_backend: Runtime,
) -> None:
    events: list[str] = []
    run_id = _shop(events, "v1").run(order="o-2").run_id
    assert run_id is not None
    v2 = _shop(events, "v2")
    with pytest.raises(DefinitionMismatchError) as refused:
        v2.undo(run_id)  # reserve is not declared any more
    assert refused.value.step == "reserve"
    done = v2.migrate(run_id, renames={"reserve": "hold_stock"})
    assert done.new_status is RunStatus.COMPLETED and done.handle is None
    v2.undo(run_id)
    assert events[2:] == ["refund ch-1 (v2)", "undo hold_stock r-o-2 (v2)"]


# --------------------------------------------------------------------- refusals


def test_a_pending_step_reading_a_renamed_step_needs_the_old_definition(
    runtime: Runtime,
) -> None:
    events: list[str] = []
    run_id, v2 = _held_run(runtime, events)
    before = _stored(runtime, run_id)
    with pytest.raises(DefinitionMismatchError) as refused:
        v2.migrate(run_id, renames={"reserve": "hold_stock"})
    assert refused.value.step == "charge"
    assert "pending_step_rewired" in str(refused.value) and "retained" in str(refused.value)
    after = _stored(runtime, run_id)
    assert after.status is RunStatus.NEEDS_VERSION
    assert after.engine_state.definition == before.engine_state.definition
    assert list(after.intermediate_results) == ["reserve"]


def test_without_a_rename_the_run_stays_incompatible_and_unchanged(runtime: Runtime) -> None:
    events: list[str] = []
    run_id = _shop(events, "v1").run(order="o-3").run_id
    assert run_id is not None
    v2 = _shop(events, "v2")
    with pytest.raises(DefinitionMismatchError) as refused:
        v2.migrate(run_id)
    assert refused.value.step == "reserve"
    assert "completed_step_removed" in str(refused.value)
    assert list(_stored(runtime, run_id).intermediate_results) == ["reserve", "charge"]


def test_a_dry_run_reports_and_writes_nothing(runtime: Runtime) -> None:
    events: list[str] = []
    run_id = _shop(events, "v1").run(order="o-4").run_id
    assert run_id is not None
    v2 = _shop(events, "v2")
    done = v2.migrate(run_id, renames={"reserve": "hold_stock"}, dry_run=True)
    assert done.dry_run and done.changed and dict(done.renamed) == {"reserve": "hold_stock"}
    assert done.to_json()["to"] == {"fingerprint": done.target.fingerprint, "version": "v2"}
    assert list(_stored(runtime, run_id).intermediate_results) == ["reserve", "charge"]


def test_a_run_on_the_current_definition_is_unchanged(runtime: Runtime) -> None:
    events: list[str] = []
    shop = _shop(events, "v1")
    run_id = shop.run(order="o-5").run_id
    assert run_id is not None
    done = shop.migrate(run_id)
    assert not done.changed and done.new_status is RunStatus.COMPLETED


def test_a_locked_run_is_refused_and_not_overwritten(runtime: Runtime) -> None:
    events: list[str] = []
    run_id = _shop(events, "v1").run(order="o-6").run_id
    assert run_id is not None
    v2 = _shop(events, "v2")
    hold = liveness.take(make_env(runtime), run_id)
    assert hold is not None
    try:
        with pytest.raises(LockAcquisitionError):
            v2.migrate(run_id, renames={"reserve": "hold_stock"})
    finally:
        hold.release()
    assert list(_stored(runtime, run_id).intermediate_results) == ["reserve", "charge"]


def test_a_running_run_is_refused(runtime: Runtime) -> None:
    events: list[str] = []
    handle = _shop(events, "v1", worker=True).run(order="o-7")
    assert isinstance(handle, DispatchHandle)
    v2 = _shop(events, "v2", worker=True)
    with pytest.raises(RunStateError) as refused:
        v2.migrate(handle.run_id, renames={"reserve": "hold_stock"})
    assert refused.value.status == "running" and "suspend" in str(refused.value)


@pytest.mark.parametrize(("renames", "field", "words"), [
    ({"unknown": "hold_stock"}, "renames", "has no step 'unknown'"),
    ({"reserve": "nowhere"}, "renames", "'nowhere' is not declared"),
    ({"reserve": "hold_stock", "charge": "hold_stock"}, "renames", "both renamed"),
    ({"reserve": "reserve"}, "renames", "renamed to itself"),
    ({"reserve": "charge"}, "renames", "already records a step 'charge'"),
    ({"reserve": ""}, "renames", "not a step name"),
    (["reserve"], "renames", "must be a mapping"),
])
def test_bad_renames_are_refused_naming_the_field(
    runtime: Runtime, renames: Any, field: str, words: str,
) -> None:
    events: list[str] = []
    run_id = _shop(events, "v1").run(order="o-8").run_id
    assert run_id is not None
    v2 = _shop(events, "v2")
    with pytest.raises(MigrationArgumentError) as refused:
        v2.migrate(run_id, renames=renames)
    assert refused.value.field == field and words in str(refused.value)
    assert list(_stored(runtime, run_id).intermediate_results) == ["reserve", "charge"]


def test_other_bad_arguments_are_refused_naming_the_field(runtime: Runtime) -> None:
    events: list[str] = []
    run_id = _shop(events, "v1").run(order="o-9").run_id
    assert run_id is not None
    v2 = _shop(events, "v2")
    with pytest.raises(MigrationArgumentError) as refused:
        v2.migrate(run_id, renames={"reserve": "hold_stock"}, to_version="v3")
    assert refused.value.field == "to_version" and "'v2'" in str(refused.value)
    with pytest.raises(MigrationArgumentError) as refused:
        v2.migrate("  ")
    assert refused.value.field == "run_id"
    with pytest.raises(MigrationArgumentError) as refused:
        v2.migrate(run_id, to_version="")
    assert refused.value.field == "to_version"


def test_a_map_step_cannot_be_renamed(runtime: Runtime) -> None:
    registry.unregister(NAME)

    class Element(Reactor, name=f"{NAME}.element"):
        item = Input(int)

        @step(item=input("item"))
        def double(inputs: Any, ctx: Any) -> int:
            return int(inputs.item) * 2

    class Mapped(Reactor, name=NAME):
        order = Input(str)

        @step(order=input("order"))
        def reserve(inputs: Any, ctx: Any) -> list[int]:
            return [1, 2]

        doubled = map_step(Element, source=result("reserve"),
                           args={"item": element("doubled")})

    try:
        run_id = Mapped.run(order="o-10").run_id
        assert run_id is not None
        with pytest.raises(MigrationArgumentError) as refused:
            Mapped.migrate(run_id, renames={"reserve": "doubled"})
        assert refused.value.field == "renames" and "map step" in str(refused.value)
    finally:
        registry.unregister(f"{NAME}.element")


# --------------------------------------------------------------------- attacks


def test_a_rename_onto_a_name_the_old_definition_declared_keeps_the_undo_check(
    runtime: Runtime,
) -> None:
    """v1 declares ``reserve`` (undo), ``gate``, ``charge``; v2 renamed ``reserve`` to
    ``charge`` and dropped its undo (v1's ``charge``, never reached, is gone). The renamed
    step's stored digest used to be overwritten by v1's ``charge`` digest, so
    ``undo_removed`` was not seen and ``reserve``'s undo was skipped for good."""
    events: list[str] = []

    def shapes(retained: bool) -> type[Reactor]:
        if not retained:
            registry.unregister(NAME)

        class V1(Reactor, name=NAME, retained=retained):
            background = Background(before="gate")
            order = Input(str)

            @step(order=input("order"))
            def reserve(inputs: Any, ctx: Any) -> str:
                return "r-1"

            @reserve.undo
            def release_it(result: Any, inputs: Any, ctx: Any) -> None:
                events.append("undo reserve")

            @step(reservation=result("reserve"))
            def gate(inputs: Any, ctx: Any) -> str:
                return "g"

            @step(after=result("gate"))
            def charge(inputs: Any, ctx: Any) -> str:
                return "c"

        if retained:
            retained_prints.append(definition_id(V1.definition).fingerprint)
        return V1

    run_id = shapes(False).run(order="o-1").run_id
    assert run_id is not None
    registry.unregister(NAME)

    class V2(Reactor, name=NAME):
        background = Background(before="gate")
        order = Input(str)

        @step(order=input("order"))
        def charge(inputs: Any, ctx: Any) -> str:  # was reserve; its undo dropped
            return "r-1"

        @step(reservation=result("charge"))
        def gate(inputs: Any, ctx: Any) -> str:
            return "g"

    _work(runtime)
    assert _stored(runtime, run_id).status is RunStatus.NEEDS_VERSION
    for with_old in (False, True):
        if with_old:
            shapes(True)  # the old release's shapes: the wiring is renamed too
        with pytest.raises(DefinitionMismatchError) as refused:
            V2.migrate(run_id, renames={"reserve": "charge"})
        assert refused.value.step == "charge" and "undo_removed" in str(refused.value)
        after = _stored(runtime, run_id)
        assert after.status is RunStatus.NEEDS_VERSION
        assert list(after.intermediate_results) == ["reserve"]


def test_migrating_a_run_twice_reports_it_unchanged(runtime: Runtime) -> None:
    """A second ``migrate`` with the same renames (an operator re-running the command)
    used to be refused with ``has no step 'reserve'`` (exit 2 on the command line)."""
    events: list[str] = []
    run_id = _shop(events, "v1").run(order="o-11").run_id
    assert run_id is not None
    v2 = _shop(events, "v2")
    assert v2.migrate(run_id, renames={"reserve": "hold_stock"}).changed
    again = v2.migrate(run_id, renames={"reserve": "hold_stock"})
    assert not again.changed and dict(again.renamed) == {}
    with pytest.raises(MigrationArgumentError) as refused:  # a new name must still exist
        v2.migrate(run_id, renames={"reserve": "nowhere"})
    assert refused.value.field == "renames"
    v2.undo(run_id)
    assert events[2:] == ["refund ch-1 (v2)", "undo hold_stock r-o-11 (v2)"]


def test_two_operators_migrating_one_run_at_once_migrate_it_once(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other operator's migrate lands between this one's first read and its lock: the
    read under the lock finds the run migrated and reports it unchanged (it used to be
    refused, ``has no step 'reserve'``); a held run, handed to a worker by the other, is
    refused as running. Either way it is migrated and continued once."""
    from reactor.engine.run_control import migrate as migrate_module

    events: list[str] = []
    done_id = _shop(events, "v1", worker=False).run(order="o-12").run_id
    held_id, v2 = _held_run(runtime, events)
    _shop(events, "v1", worker=True, retained=True)
    take = liveness.take
    raced: list[Any] = []

    def other_operator_first(env: Any, key: str, **kw: Any) -> Any:
        if len(raced) < 2 and key not in raced:
            raced.append(key)
            raced.append(v2.migrate(key, renames={"reserve": "hold_stock"}))
        return take(env, key, **kw)

    monkeypatch.setattr(migrate_module.liveness, "take", other_operator_first)
    assert done_id is not None
    mine = v2.migrate(done_id, renames={"reserve": "hold_stock"})
    assert raced[1].changed and not mine.changed
    raced.clear()
    with pytest.raises(RunStateError) as refused:
        v2.migrate(held_id, renames={"reserve": "hold_stock"})
    assert refused.value.status == "running"
    assert raced[1].changed and raced[1].handle is not None  # enqueued once, by the other
    monkeypatch.undo()
    _work(runtime)
    assert _stored(runtime, held_id).status is RunStatus.COMPLETED
    v2.undo(done_id)
    assert events.count("undo hold_stock r-o-12 (v2)") == 1
    assert events.count("charge r-o-1 (v2)") == 1
