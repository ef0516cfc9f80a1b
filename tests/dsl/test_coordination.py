"""Coordination declarations: shapes, validation, inheritance and merging."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import (
    Input,
    Reactor,
    Step,
    step,
    with_lock,
    with_ordered_lock,
    with_period,
    with_rate_limit,
    with_semaphore,
)
from reactor.dsl.coordination import (
    LockDecl,
    OrderedLockDecl,
    PeriodDecl,
    RateLimitDecl,
    SemaphoreDecl,
)
from reactor.errors import CoordinationKeyError, DefinitionError
from reactor.model.records import RateWindow


def test_factories_build_declarations_with_documented_defaults() -> None:
    lock = with_lock(key="k")
    assert lock == LockDecl(key="k", ttl=60.0, wait=0.0, auto_extend=True)
    assert lock.effective_rollback_wait == 60.0
    assert with_lock(ttl=10, rollback_wait=3).effective_rollback_wait == 3.0
    sem = with_semaphore(key="s", limit=3)
    assert (sem.limit, sem.wait, sem.lease, sem.effective_rollback_wait) == (3, 0.0, 60.0, 60.0)
    assert with_period(every="day") == PeriodDecl(every="day")
    assert with_ordered_lock(key="o") == OrderedLockDecl(
        key="o", poison_pill_timeout=600.0, ttl=86400.0, strict=True
    )


def test_rate_limit_forms() -> None:
    single = with_rate_limit(key="api", limit=10, period="minute")
    assert single.windows == (RateWindow(name="minute", seconds=60.0, limit=10),)
    multi = with_rate_limit(key="api", limits={"second": 3, "minute": 100})
    assert [w.name for w in multi.windows] == ["second", "minute"]
    named = with_rate_limit("stripe")
    assert named == RateLimitDecl(key="stripe", name="stripe")  # the name is the shared key
    assert with_rate_limit("stripe", key="per-tenant").key == "per-tenant"


@pytest.mark.parametrize(
    "build",
    [
        lambda: with_lock(ttl=0),
        lambda: with_lock(wait=-1),
        lambda: with_lock(key=42),  # type: ignore[arg-type]
        lambda: with_semaphore(limit=0),
        lambda: with_semaphore(limit=2, lease=0),
        lambda: with_rate_limit(),
        lambda: with_rate_limit("x", limit=1, period=1),
        lambda: with_rate_limit(key="k", limit=0, period=1),
        lambda: with_rate_limit(key="k", limits={"fortnight": 1}),
        lambda: with_rate_limit(key="k", period=5),
        lambda: with_period(every="decade"),
        lambda: with_period(every=0),
        lambda: with_ordered_lock(poison_pill_timeout=0),
    ],
)
def test_bad_arguments_are_definition_errors(build: Any) -> None:
    with pytest.raises(DefinitionError):
        build()


def test_key_resolution_constant_function_default_and_errors() -> None:
    assert with_lock().resolve_key({}, "dflt") == "dflt"
    assert with_lock(key="const").resolve_key({"a": 1}, "dflt") == "const"
    fn = with_lock(key=lambda inputs: f"acct:{inputs.account}")
    assert fn.resolve_key({"account": 7}, "dflt") == "acct:7"
    with pytest.raises(CoordinationKeyError, match="UndeclaredInputError"):
        fn.resolve_key({}, "dflt")
    with pytest.raises(CoordinationKeyError, match="returned None"):
        with_lock(key=lambda inputs: None).resolve_key({}, "dflt")


def test_reactor_level_list_or_single_declaration_is_inherited() -> None:
    class Base(Reactor):
        account = Input(str)
        coordination = [with_lock(key=lambda i: i.account), with_semaphore(key="s", limit=2)]
        one = step(lambda inputs, ctx: 1)

    class Child(Base):
        pass

    class Single(Reactor):
        coordination = with_period(every="hour")
        one = step(lambda inputs, ctx: 1)

    assert [d.primitive for d in Base.definition.coordination] == ["lock", "semaphore"]
    assert Child.definition.coordination == Base.definition.coordination
    assert Single.coordination == (PeriodDecl(every="hour"),)
    assert Single.definition.coordination == (PeriodDecl(every="hour"),)


def test_step_class_and_inline_declarations_are_merged() -> None:
    class Charge(Step):
        card = Input(str)
        coordination = [with_lock(key=lambda i: i.card)]

        def run(self) -> str:
            return "ok"

    class R(Reactor):
        card = Input(str)
        charge = step(Charge, coordination=[with_rate_limit(key="gw", limit=5, period=1)])

        @step(coordination=with_semaphore(key="pool", limit=2))
        def report(inputs: Any, ctx: Any) -> None:
            return None

    assert Charge.coordination == (Charge.coordination[0],)
    assert [d.primitive for d in R.definition.steps["charge"].coordination] == [
        "lock", "rate_limit",
    ]
    assert [d.primitive for d in R.definition.steps["report"].coordination] == ["semaphore"]


def test_same_primitive_twice_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError, match="with_lock is declared twice"):

        class R(Reactor):
            coordination = [with_lock(key="a"), with_lock(key="b")]

    with pytest.raises(DefinitionError, match="declared twice"):

        class S(Step):
            coordination = [with_period(every="day"), with_period(every="hour")]

    class Locked(Step):
        coordination = with_lock(key="a")

    with pytest.raises(DefinitionError, match="both on the Step class and inline"):
        step(Locked, coordination=[with_lock(key="b")])
    with pytest.raises(DefinitionError, match="declared twice"):
        step(lambda i, c: 1, coordination=[with_semaphore(limit=1), with_semaphore(limit=2)])


def test_coordination_must_hold_declarations_and_is_a_reserved_name() -> None:
    with pytest.raises(DefinitionError, match="coordination entries"):

        class R(Reactor):
            coordination = ["lock"]

    with pytest.raises(DefinitionError, match="coordination must be"):

        class S(Step):
            coordination = "with_lock"

    with pytest.raises(DefinitionError, match="reserved"):

        class T(Step):
            coordination_input = Input(str)
            coordination = Input(str)


def test_declaration_kinds_expose_their_primitive() -> None:
    kinds = {
        LockDecl: "lock", SemaphoreDecl: "semaphore", RateLimitDecl: "rate_limit",
        PeriodDecl: "period", OrderedLockDecl: "ordered_lock",
    }
    for cls, name in kinds.items():
        assert cls.primitive == name
