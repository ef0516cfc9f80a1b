"""Shared helpers for the coordination engine tests: a manual-clock runtime on a fake wait
clock, a recording storage, and worker-mode execution of stored contexts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from reactor import config
from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import coordination, executor
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.env import Env, make_env
from reactor.engine.state import RunState
from reactor.memory import ManualClock, MemoryStorage
from reactor.model.context import Context
from reactor.model.results import Failure, Success
from tests.fake_clock import FakeClock

#: 2026-11-29T12:00:00Z
START = 1_795_953_600.0


def manual_runtime(clock: FakeClock | None = None) -> tuple[Runtime, MemoryStorage]:
    """Configure a memory storage on a manual clock (TTLs never lapse on their own), the
    runtime on ``clock`` (coordination waits poll on it instead of sleeping)."""
    storage = MemoryStorage(clock=ManualClock(START))
    runtime = config.configure(storage=storage, router="inline://", clock=clock or FakeClock())
    return runtime, storage


class Recorder:
    """Proxy of a coordination sub-store that logs ``"<name>.<method>"`` for every call."""

    def __init__(self, inner: Any, name: str, events: list[str]) -> None:
        self._inner = inner
        self._name = name
        self._events = events

    def __getattr__(self, attr: str) -> Any:
        target = getattr(self._inner, attr)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            # the run's own liveness lock and its reactor's suspend switch (read before each
            # step: docs/operations.md, "Suspend and unsuspend") are not user coordination
            engine = bool(args) and isinstance(args[0], str) and args[0].startswith(
                ("async:", "@suspended_reactor:")
            )
            if not engine:
                self._events.append(f"{self._name}.{attr}")
            return target(*args, **kwargs)

        return call


def record_coordination(storage: MemoryStorage, events: list[str]) -> None:
    """Make every coordination sub-store of ``storage`` log its calls into ``events``."""
    for attr, name in (
        ("locks", "lock"), ("semaphores", "semaphore"), ("rate_limits", "rate"),
        ("periods", "period"), ("ordered_locks", "ordered"),
    ):
        setattr(storage, attr, Recorder(getattr(storage, attr), name, events))


def worker_env() -> Env:
    """The current runtime's environment, as a worker job sees it."""
    return replace(make_env(), in_worker=True)


def enqueue(definition: ReactorDefinition, inputs: Mapping[str, Any], run_id: str) -> None:
    """Store a run the way a background caller does: validated, ticketed, saved."""
    env = worker_env()
    ctx = Context(
        context_id=run_id, reactor=definition.name,
        inputs=definition.contract.validate(inputs), created_at=env.now(),
    )
    coordination.assign_ordered_ticket(definition, ctx, env)
    Checkpointer(env, ctx).save()


def deliver(
    definition: ReactorDefinition, run_id: str, env: Env | None = None
) -> Success | Failure:
    """Execute the stored run ``run_id`` (a job delivery); a ``Park`` propagates."""
    env = env or worker_env()
    ctx = load_context(env, run_id)
    assert ctx is not None
    return executor.execute(RunState(definition, ctx, env, Checkpointer(env, ctx)))


def stored(run_id: str) -> Context:
    """The stored context of ``run_id``."""
    ctx = load_context(make_env(), run_id)
    assert ctx is not None
    return ctx

