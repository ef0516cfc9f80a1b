"""The engine state of a stored run through real executions (reactor/model/engine_state.py;
docs/protocol.md, "Contexts"): keys this version does not know survive the engine's saves, and
a malformed known key quarantines the run like any unreadable document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from reactor import Background, Input, Reactor, config, input, step
from reactor.config import Runtime
from reactor.engine.checkpoint import load_context
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.env import make_env
from reactor.engine.quarantine import quarantine_info
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model import checkpoints
from reactor.model.results import Failure, Success
from reactor.model.status import RunStatus


class Queued(Reactor, name="test_engine_state_stored.queued"):
    n = Input(int)
    background = Background(all=True)

    @step(n=input("n"))
    def double(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) * 2

    returns = "double"


class Flaky(Reactor, name="test_engine_state_stored.flaky"):
    n = Input(int)

    @step(n=input("n"))
    def boom(inputs: Any, ctx: Any) -> int:
        raise RuntimeError("down")


@pytest.fixture
def rt() -> Iterator[Runtime]:
    clock = ManualClock(1_700_000_000.0)
    runtime = config.configure(
        storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock)
    )
    yield runtime
    config.reset()


def _queued_with_private_data(rt: Runtime, **changes: Any) -> str:
    """A queued run whose stored ``private_data`` gets ``changes`` (as a newer or a broken
    writer would have stored it)."""
    handle = Queued.run(n=21)
    assert isinstance(handle, DispatchHandle)
    record = rt.storage.contexts.load(handle.run_id)
    assert record is not None
    document = json.loads(record.document)
    document["private_data"].update(changes)
    rt.storage.contexts.save(replace(record, document=json.dumps(document)))
    return handle.run_id


def test_keys_this_version_does_not_know_survive_the_engines_saves(rt: Runtime) -> None:
    future = {"scheduled_by": "planner-v9", "budget": {"cpu_s": 2.5}}
    run_id = _queued_with_private_data(rt, future_fact=future)
    assert Worker(rt, liveness_wait=0.0).run_pending() == 1
    assert Queued.find(run_id).status is RunStatus.COMPLETED
    record = rt.storage.contexts.load(run_id)
    assert record is not None
    private = checkpoints.raw_document(record)["private_data"]
    assert private["future_fact"] == future
    assert private["handed_off"] == "all" and "validate_inputs" not in private
    ctx = load_context(make_env(rt), run_id)
    assert ctx is not None and ctx.engine_state.extra == {"future_fact": future}


def test_a_malformed_engine_state_quarantines_the_run_naming_the_field(rt: Runtime) -> None:
    run_id = _queued_with_private_data(rt, validate_inputs="yes")
    worker = Worker(rt, liveness_wait=0.0)
    assert worker.run_pending() == 1
    assert worker.jobs_dead_lettered == 1
    view = Queued.find(run_id)
    assert view.status is RunStatus.FAILED
    assert isinstance(view.failure, Failure) and view.failure.is_retryable is False
    assert view.failure.exception_class == "reactor.errors.DeserializationError"
    assert "'private_data.validate_inputs'" in view.failure.message
    ctx = load_context(make_env(rt), run_id)
    assert ctx is not None
    info = quarantine_info(ctx)
    assert info is not None and info.original_status == "running"
    assert '"validate_inputs":"yes"' in info.original_document.replace(" ", "")
    assert worker.run_pending() == 0  # never re-executed


def test_a_retry_links_both_runs_through_their_engine_state(rt: Runtime) -> None:
    failed = Flaky.run(n=1)
    assert isinstance(failed, Failure) and failed.run_id is not None
    retried = Flaky.retry(failed.run_id)
    assert not isinstance(retried, Success | DispatchHandle)
    assert retried.run_id is not None
    env = make_env(rt)
    old = load_context(env, failed.run_id)
    new = load_context(env, retried.run_id)
    assert old is not None and new is not None
    assert old.engine_state.links.retries == (retried.run_id,)
    assert new.engine_state.links.retried_from == failed.run_id
    assert Flaky.find(failed.run_id).retries == (retried.run_id,)
