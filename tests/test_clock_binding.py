"""One clock (docs/testing.md, "The clock"; docs/architecture.md, "Layers").

The runtime carries a :class:`reactor.ports.Clock`; every wait of the engine goes through it,
so a test controls time with ``reactor.configure(clock=...)`` or a ``TestEnvironment``, never by
patching a module. Nothing in ``reactor/`` or ``adapters/`` binds the system clock when it is
imported: a clock or sleep argument defaults to ``None`` ("the system clock, read at call
time"), which the scan below enforces on the source.
"""

from __future__ import annotations

import ast
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactor import (
    ConfigurationError,
    Failure,
    Reactor,
    Retries,
    Success,
    config,
    step,
    with_lock,
)
from reactor.coordination import Lock
from reactor.memory import MemoryStorage
from reactor.memory.documents import MemoryDocumentStore
from reactor.ports import SYSTEM_CLOCK, Clock, SystemClock
from reactor.testing import TestClock, TestEnvironment
from reactor.testing.clock import DEFAULT_START
from tests.fake_clock import FakeClock

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("reactor", "adapters")

#: The functions of the ``time`` module that read the system clock or wait on it.
CLOCK_FUNCTIONS = frozenset({
    "time", "time_ns", "monotonic", "monotonic_ns", "sleep", "perf_counter", "perf_counter_ns",
})


def _time_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names a module binds to the ``time`` module, and to its clock functions."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "time"}
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            functions |= {a.asname or a.name for a in node.names if a.name in CLOCK_FUNCTIONS}
    return modules, functions


def _is_clock_function(node: ast.expr | None, modules: set[str], functions: set[str]) -> bool:
    """Whether ``node`` *is* a clock function (``time.sleep``), not a call of one."""
    if isinstance(node, ast.Attribute):
        return (isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr in CLOCK_FUNCTIONS)
    return isinstance(node, ast.Name) and node.id in functions


def _bound_clocks(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of every clock function bound at import time: a function's default
    value, or a module-level or class-level assignment (a hook, a dataclass field default)."""
    tree = ast.parse(source)
    modules, functions = _time_aliases(tree)
    found: list[tuple[int, str]] = []

    def check(node: ast.expr | None, what: str) -> None:
        if node is not None and _is_clock_function(node, modules, functions):
            found.append((node.lineno, f"{what} = {ast.unparse(node)}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            name = getattr(node, "name", "<lambda>")
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                check(default, f"default of {name}()")
    for body in [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        for statement in body:
            if isinstance(statement, ast.Assign | ast.AnnAssign):
                check(statement.value, "assignment")
    return sorted(found)


def test_the_scan_finds_every_way_of_binding_the_system_clock() -> None:
    source = '''
import time
import time as t
from time import monotonic as mono

sleep = time.sleep
hook: object = t.perf_counter

def f(clock=time.time, *, wait=mono, ok=time.time()): ...

class C:
    now = time.monotonic_ns

g = lambda sleep=time.sleep: sleep
'''
    assert [line for line, _ in _bound_clocks(source)] == [6, 7, 9, 9, 12, 14]
    assert _bound_clocks("import time\n\ndef f(x=time.time()):\n    return time.sleep(x)\n") == []


def test_nothing_in_reactor_or_the_adapters_binds_the_system_clock_at_import() -> None:
    files = [path for source in SCANNED for path in sorted((ROOT / source).rglob("*.py"))
             if ".venv" not in path.parts]
    assert len(files) > 150  # the scan read the packages
    bound = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in files
        for line, what in _bound_clocks(path.read_text(encoding="utf-8"))
    ]
    assert bound == [], (
        "the system clock is bound at import; default to None (the system clock, read at "
        "call time) or take a reactor.ports.Clock (docs/testing.md, \"The clock\"):\n"
        + "\n".join(bound)
    )


# ------------------------------------------------------------------------------ behaviour


@pytest.fixture
def real_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every call of the real ``time.sleep`` made by the test's thread, recorded instead of
    slept (the system clock looks ``time.sleep`` up when called, so this sees any real wait);
    other threads of the process sleep as usual."""
    calls: list[float] = []
    test_thread, real_sleep = threading.current_thread(), time.sleep

    def sleep(seconds: float) -> None:
        if threading.current_thread() is test_thread:
            calls.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    return calls


@pytest.fixture
def unconfigured() -> Iterator[None]:
    config.reset()
    yield
    config.reset()


def test_the_system_clock_reads_the_time_module_when_called(
    monkeypatch: pytest.MonkeyPatch, real_sleeps: list[float]
) -> None:
    assert isinstance(SYSTEM_CLOCK, SystemClock) and isinstance(SYSTEM_CLOCK, Clock)
    SYSTEM_CLOCK.sleep(1.5)
    assert real_sleeps == [1.5]
    storage, documents = MemoryStorage(), MemoryDocumentStore()  # built before the patch
    with monkeypatch.context() as patched:
        patched.setattr(time, "time", lambda: 42.0)
        patched.setattr(time, "monotonic", lambda: 7.0)
        assert SYSTEM_CLOCK.now() == 42.0 and SYSTEM_CLOCK.monotonic() == 7.0
        # constructor defaults read the system clock at call time, none was bound at import
        assert storage.now() == 42.0 and documents.now() == 42.0


def test_configure_refuses_a_clock_that_is_not_a_clock(unconfigured: None) -> None:
    with pytest.raises(ConfigurationError, match=r"clock=.*reactor\.ports\.Clock"):
        config.configure(storage="memory://", router="inline://", clock=time.sleep)  # type: ignore[arg-type]
    assert config.configure(storage="memory://", router="inline://").clock is SYSTEM_CLOCK


#: The attempts :class:`Flaky` made (cleared by each test).
ATTEMPTS: list[int] = []


class Flaky(Reactor):
    @step(retries=Retries(max_attempts=3, backoff="fixed", base_delay=3600))
    def call(inputs: Any, ctx: Any) -> str:
        ATTEMPTS.append(ctx.attempt)
        if len(ATTEMPTS) % 3:
            raise RuntimeError("flaky")
        return "ok"


class Guarded(Reactor):
    @step(coordination=with_lock(key="guarded", wait=5))
    def work(inputs: Any, ctx: Any) -> str:
        return "ran"


def test_a_configured_clock_takes_every_retry_and_coordination_wait(
    unconfigured: None, real_sleeps: list[float]
) -> None:
    fake = FakeClock()
    runtime = config.configure(storage="memory://", router="inline://", clock=fake)
    assert runtime.clock is fake
    ATTEMPTS.clear()
    outcome = Flaky.run()
    assert isinstance(outcome, Success) and outcome.value == {"call": "ok"}
    assert ATTEMPTS == [1, 2, 3]
    assert fake.sleeps == [3600.0, 3600.0] and real_sleeps == []  # two hours, no real time

    holder = Lock(runtime.storage.locks, "guarded", owner="someone else", auto_extend=False)
    assert holder.try_acquire()
    contended = Guarded.run()
    assert isinstance(contended, Failure)
    assert fake.slept == pytest.approx(7200.0 + 5.0)  # polled its 5 s on the fake clock
    assert real_sleeps == []


def test_a_per_run_sleep_replaces_the_clocks_for_retry_waits(
    unconfigured: None, real_sleeps: list[float]
) -> None:
    fake = FakeClock()
    config.configure(storage="memory://", router="inline://", clock=fake)
    ATTEMPTS.clear()
    mine: list[float] = []
    assert Flaky.execute({}, sleep=mine.append).success
    assert mine == [3600.0, 3600.0] and fake.sleeps == [] and real_sleeps == []


def test_a_test_environments_retries_advance_its_test_clock(real_sleeps: list[float]) -> None:
    assert isinstance(TestClock(), Clock)
    ATTEMPTS.clear()
    with TestEnvironment() as env:
        assert config.current().clock is env.clock
        outcome = Flaky.run()
        assert isinstance(outcome, Success)
        assert env.clock.sleeps == [3600.0, 3600.0]
        assert env.clock.now() == env.clock.monotonic() == DEFAULT_START + 7200
        view = Flaky.find(outcome.run_id or "")
        assert view.updated_at == DEFAULT_START + 7200  # the storage saw the time move too
    assert real_sleeps == []
