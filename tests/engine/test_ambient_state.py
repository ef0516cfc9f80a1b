"""Ambient run state is held in context variables (reactor/engine/liveness.py,
reactor/engine/coordination/unit.py): a value set in one thread is seen in that thread only,
a new thread starts with none (as with the thread-locals they replace), and no two contexts
share one mutable object (docs/architecture.md, "Execution invariants")."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

from reactor.coordination.lock import Lock
from reactor.engine import liveness
from reactor.engine.coordination import unit
from reactor.memory import MemoryStorage

T = TypeVar("T")


def _in_new_thread(read: Callable[[], T]) -> T:
    """``read()`` called in a fresh thread, its result returned (exceptions re-raised)."""
    out: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            out.append(read())
        except BaseException as exc:  # re-raised in the caller
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return out[0]


def _hold(context_id: str) -> liveness.Liveness:
    """A (pending, never taken) hold of the run's liveness lock by this thread."""
    lock = Lock(MemoryStorage().locks, f"async:{context_id}", owner="me", auto_extend=False)
    return liveness.Liveness(context_id, lock, pending=True)


def test_a_held_liveness_lock_is_seen_in_its_thread_only() -> None:
    before = contextvars.copy_context()
    hold = _hold("run-a")
    try:
        assert liveness.held_here("run-a")
        assert not _in_new_thread(lambda: liveness.held_here("run-a"))
        assert not before.run(liveness.held_here, "run-a")  # no shared set was mutated

        def other_thread_holds_its_own() -> tuple[bool, bool]:
            theirs = _hold("run-b")
            try:
                return liveness.held_here("run-b"), liveness.held_here("run-a")
            finally:
                theirs.forgo()

        assert _in_new_thread(other_thread_holds_its_own) == (True, False)
        assert not liveness.held_here("run-b")
    finally:
        hold.forgo()
    assert not liveness.held_here("run-a")


def test_a_nested_hold_is_dropped_alone() -> None:
    outer, inner = _hold("run-outer"), _hold("run-inner")
    inner.forgo()
    assert liveness.held_here("run-outer") and not liveness.held_here("run-inner")
    outer.forgo()
    assert not liveness.held_here("run-outer")


def test_an_active_ordered_key_is_seen_in_its_thread_only() -> None:
    before = contextvars.copy_context()
    unit._enter_ordered_key("orders:1")
    try:
        assert "orders:1" in unit.active_ordered_keys()
        assert _in_new_thread(unit.active_ordered_keys) == frozenset()
        assert "orders:1" not in before.run(unit.active_ordered_keys)

        def other_thread_enters_its_own() -> frozenset[str]:
            unit._enter_ordered_key("orders:2")
            try:
                return unit.active_ordered_keys()
            finally:
                unit._leave_ordered_key("orders:2")

        assert _in_new_thread(other_thread_enters_its_own) == {"orders:2"}
        assert unit.active_ordered_keys() == {"orders:1"}
    finally:
        unit._leave_ordered_key("orders:1")
    assert unit.active_ordered_keys() == frozenset()
