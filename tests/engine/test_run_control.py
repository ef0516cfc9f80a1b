"""Idempotency keys and ``Reactor.retry`` on every backend (docs/run-control.md).

Every backend: ten threads racing one key make one run (one id, each step body once); a later
caller gets the finished run's outcome (success and failure); two reactors with one key are
independent; bad keys are refused with a typed error naming the field; a failed run with a
``redact=True`` input is retried with the same (decrypted) inputs, linked both ways, and its
key moves to the retry; a completed run is not retried. In-process only: background runs, a
dead claimer's key taken over, the key's lifetime, invalid inputs leaving the key free, and
``reactor runs retry``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import (
    Background,
    DispatchHandle,
    Failure,
    IdempotencyKeyError,
    Input,
    Reactor,
    RunNotFoundError,
    RunStateError,
    Success,
    config,
    input,
    step,
)
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.engine import liveness
from reactor.engine.env import make_env
from reactor.engine.run_control import idempotency
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model.context import new_context_id
from reactor.model.secrets import ENV_VAR, generate_key
from reactor.model.status import RunStatus
from tests.backends import BACKENDS, backend_urls

SECRET = "tok_visa_SECRET_4242"

_lock = threading.Lock()
bodies: list[str] = []  # one entry per step body execution
outage = {"on": False}


def _record(entry: str) -> None:
    with _lock:
        bodies.append(entry)


class Slow(Reactor, name="test_run_control.slow"):
    returns = "charge"
    order_id = Input(str)

    @step(order_id=input("order_id"))
    def charge(inputs: Any, ctx: Any) -> str:
        _record(f"slow:{inputs.order_id}")
        time.sleep(0.3)  # the losers of the race meet a run in progress
        return f"charged {inputs.order_id}"


class Twin(Reactor, name="test_run_control.twin"):
    returns = "charge"
    order_id = Input(str)

    @step(order_id=input("order_id"))
    def charge(inputs: Any, ctx: Any) -> str:
        _record(f"twin:{inputs.order_id}")
        return f"twin {inputs.order_id}"


class Pay(Reactor, name="test_run_control.pay"):
    returns = "pay"
    amount = Input(int, gt=0)
    card_token = Input(str, redact=True)

    @step(amount=input("amount"), card_token=input("card_token"))
    def pay(inputs: Any, ctx: Any) -> str:
        _record(f"pay:{inputs.card_token}")
        if outage["on"]:
            raise ConnectionError("gateway down")
        return f"paid {inputs.amount}"


class Queued(Reactor, name="test_run_control.queued"):
    returns = "charge"
    order_id = Input(str)
    background = Background(all=True)

    @step(order_id=input("order_id"))
    def charge(inputs: Any, ctx: Any) -> str:
        _record(f"queued:{inputs.order_id}")
        return f"queued {inputs.order_id}"


# ------------------------------------------------------------------------------ backends


def _configure(name: str, service_url: Callable[[str], str], token: str) -> Runtime:
    if name == "memory":
        return config.configure(storage=MemoryStorage(), router=LocalRouter())
    storage, router = backend_urls(name, service_url, token, area="runcontrol")
    return config.configure(storage=storage, router=router)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> str:
    key = generate_key()
    monkeypatch.setenv(ENV_VAR, key)
    return key


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, service_url: Callable[[str], str], keys: str
) -> Iterator[Runtime]:
    runtime = _configure(request.param, service_url, f"rc{uuid.uuid4().hex[:10]}")
    bodies.clear()
    outage["on"] = False
    yield runtime
    config.reset()


@pytest.fixture
def memory(keys: str) -> Iterator[Runtime]:
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter())
    bodies.clear()
    outage["on"] = False
    yield runtime
    config.reset()


def _stored_runs(runtime: Runtime, reactor: str) -> list[str]:
    return [r.context_id for r in runtime.storage.contexts.page(limit=100).runs
            if r.reactor == reactor]


# ------------------------------------------------------------------------------ every backend


def test_ten_threads_racing_one_key_make_one_run(backend: Runtime) -> None:
    results: list[Any] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(10)

    def call() -> None:
        barrier.wait()
        try:
            results.append(Slow.run(order_id="o-1", idempotency_key="order:o-1"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert len(results) == 10
    assert all(isinstance(r, Success) and r.value == "charged o-1" for r in results), results
    assert len({r.run_id for r in results}) == 1
    assert bodies == ["slow:o-1"]
    assert _stored_runs(backend, Slow.reactor_name) == [results[0].run_id]
    assert Slow.find(results[0].run_id).idempotency_key == "order:o-1"


def test_a_finished_runs_outcome_is_returned_to_a_later_caller(backend: Runtime) -> None:
    first = Twin.run(order_id="o-1", idempotency_key="k-done")
    later = Twin.run(order_id="other inputs are not compared", idempotency_key="k-done")
    assert isinstance(later, Success) and later.value == "twin o-1"
    assert later.run_id == first.run_id

    outage["on"] = True
    failed = Pay.run(amount=5, card_token=SECRET, idempotency_key="k-failed")
    outage["on"] = False
    again = Pay.run(amount=5, card_token=SECRET, idempotency_key="k-failed")
    assert isinstance(failed, Failure) and isinstance(again, Failure)
    assert again.run_id == failed.run_id and again.step_name == "pay"
    assert bodies == ["twin:o-1", f"pay:{SECRET}"]  # neither body ran for the later callers


def test_different_reactors_with_the_same_key_are_independent(backend: Runtime) -> None:
    twin = Twin.run(order_id="o-1", idempotency_key="shared")
    slow = Slow.run(order_id="o-1", idempotency_key="shared")
    assert twin.success and slow.success
    assert twin.run_id != slow.run_id
    assert sorted(bodies) == ["slow:o-1", "twin:o-1"]


@pytest.mark.parametrize("key", ["", "   ", "k" * 256, 42, b"bytes"])
def test_bad_keys_are_rejected_with_an_error_naming_the_field(
    backend: Runtime, key: Any
) -> None:
    with pytest.raises(IdempotencyKeyError, match="idempotency_key") as info:
        Twin.run(order_id="o-1", idempotency_key=key)
    assert info.value.field == "idempotency_key"
    assert isinstance(info.value, ValueError)
    assert bodies == [] and _stored_runs(backend, Twin.reactor_name) == []


def test_the_longest_key_is_accepted(backend: Runtime) -> None:
    assert Twin.run(order_id="o-1", idempotency_key="é" * 255).success


def test_retry_of_a_failed_secret_run_reuses_its_inputs_and_links_both_ways(
    backend: Runtime,
) -> None:
    outage["on"] = True
    failed = Pay.run(amount=7, card_token=SECRET, idempotency_key="cart:7")
    assert isinstance(failed, Failure) and failed.run_id
    outage["on"] = False

    retried = Pay.retry(failed.run_id)
    assert isinstance(retried, Success) and retried.value == "paid 7"
    assert retried.run_id and retried.run_id != failed.run_id
    assert bodies == [f"pay:{SECRET}", f"pay:{SECRET}"]  # the clear secret, both times
    new_view, old_view = Pay.find(retried.run_id), Pay.find(failed.run_id)
    assert new_view.retried_from == failed.run_id and new_view.retries == ()
    assert old_view.retries == (retried.run_id,) and old_view.retried_from is None
    assert old_view.status is RunStatus.FAILED
    assert new_view.inputs == {"amount": 7, "card_token": "[REDACTED]"}
    record = backend.storage.contexts.load(retried.run_id)
    assert record is not None  # sealed again at rest, in the base and every segment
    assert all(SECRET not in text for text in (record.document, *record.segments))
    # the key moved to the retry
    assert new_view.idempotency_key == "cart:7"
    again = Pay.run(amount=7, card_token=SECRET, idempotency_key="cart:7")
    assert again.run_id == retried.run_id and again.success
    assert len(bodies) == 2


def test_retry_of_a_completed_run_is_refused(backend: Runtime) -> None:
    done = Twin.run(order_id="o-1")
    assert done.run_id
    with pytest.raises(RunStateError, match="only a failed or cancelled run") as info:
        Twin.retry(done.run_id)
    assert info.value.status == "completed" and info.value.run_id == done.run_id
    assert Twin.find(done.run_id).retries == ()
    assert _stored_runs(backend, Twin.reactor_name) == [done.run_id]
    assert bodies == ["twin:o-1"]


# ------------------------------------------------------------------------------ in-process


def test_retry_refuses_unknown_runs_other_reactors_and_invalid_inputs(memory: Runtime) -> None:
    with pytest.raises(RunNotFoundError):
        Pay.retry("no-such-run")
    done = Twin.run(order_id="o-1")
    with pytest.raises(RunNotFoundError):
        Pay.retry(done.run_id or "")
    invalid = Pay.run(amount=-1, card_token=SECRET)
    with pytest.raises(RunStateError, match="failed before any step ran"):
        Pay.retry(invalid.run_id or "")


def test_a_cancelled_run_can_be_retried_through_the_base_class(memory: Runtime) -> None:
    done = Twin.run(order_id="o-2")
    assert Twin.undo(done.run_id or "").success
    assert Twin.find(done.run_id or "").status is RunStatus.CANCELLED
    retried = Reactor.retry(done.run_id or "")
    assert retried.success and Twin.find(retried.run_id or "").retried_from == done.run_id
    second = Reactor.retry(done.run_id or "")
    assert Twin.find(done.run_id or "").retries == (retried.run_id, second.run_id)


def test_invalid_inputs_fail_without_taking_the_key(memory: Runtime) -> None:
    invalid = Pay.run(amount=-1, card_token=SECRET, idempotency_key="k")
    assert isinstance(invalid, Failure) and invalid.validation_errors
    valid = Pay.run(amount=1, card_token=SECRET, idempotency_key="k")
    assert valid.success and valid.run_id != invalid.run_id


def test_a_background_run_with_a_key_gives_every_caller_its_handle(memory: Runtime) -> None:
    first = Queued.run(order_id="o-1", idempotency_key="q")
    second = Queued.run(order_id="o-1", idempotency_key="q")
    assert isinstance(first, DispatchHandle) and isinstance(second, DispatchHandle)
    assert second.run_id == first.run_id and second.job_id == "" and first.job_id
    assert Worker(memory, liveness_wait=0.0).run_pending() >= 1
    third = Queued.run(order_id="o-1", idempotency_key="q")
    assert isinstance(third, Success) and third.run_id == first.run_id
    assert second.wait(1).success
    assert bodies == ["queued:o-1"]


def test_a_claimer_that_died_before_storing_its_run_loses_the_key(memory: Runtime) -> None:
    env = make_env(memory)
    ghost = new_context_id()  # claimed, never stored, lock not held: the claimer is gone
    assert memory.storage.claims.claim_idempotency_key(Twin.reactor_name, "k", ghost) is None
    outcome = Twin.run(order_id="o-1", idempotency_key="k")
    assert outcome.success and outcome.run_id != ghost
    tombstone = Twin.find(ghost)
    assert tombstone.status is RunStatus.FAILED and tombstone.failure is not None
    assert tombstone.failure.exception_class == (
        "reactor.errors.AbandonedRunError"
    )
    with pytest.raises(RunStateError):
        Twin.retry(ghost)
    # a claimer still alive (its lock held) is waited for instead, then answered with a handle
    alive = new_context_id()
    hold = liveness.take(env, alive)
    assert hold is not None
    try:
        assert memory.storage.claims.claim_idempotency_key(Twin.reactor_name, "k2", alive) is None
        config.configure(storage=memory.storage, router=memory.router, async_wait_timeout=0.3)
        waiting = Twin.run(order_id="o-1", idempotency_key="k2")
        assert isinstance(waiting, DispatchHandle) and waiting.run_id == alive
    finally:
        hold.release()
    assert bodies == ["twin:o-1"]


def test_a_key_names_its_finished_run_for_its_ttl(keys: str) -> None:
    clock = ManualClock(1_700_000_000.0)
    runtime = config.configure(
        storage=MemoryStorage(clock=clock), router=LocalRouter(), idempotency_key_ttl=60
    )
    bodies.clear()
    try:
        assert idempotency.key_ttl(make_env(runtime)) == 60
        first = Twin.run(order_id="o-1", idempotency_key="k")
        clock.advance(59)
        assert Twin.run(order_id="o-1", idempotency_key="k").run_id == first.run_id
        clock.advance(2)
        fresh = Twin.run(order_id="o-1", idempotency_key="k")
        assert fresh.success and fresh.run_id != first.run_id
        assert bodies == ["twin:o-1", "twin:o-1"]
    finally:
        config.reset()


def test_reactor_cannot_declare_the_reserved_input_names() -> None:
    from reactor import DefinitionError

    for name in ("retry", "idempotency_key"):
        with pytest.raises(DefinitionError):
            type("Bad", (Reactor,), {name: Input(str), "__module__": __name__})


def test_cli_runs_retry(memory: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_cli, "_runtime", lambda *_a, **_k: memory)
    runner = CliRunner()
    outage["on"] = True
    failed = Pay.run(amount=3, card_token=SECRET)
    out = runner.invoke(app, ["runs", "retry", failed.run_id or ""])
    assert out.exit_code == 1, out.output  # the retry ran and failed again
    new_id, status = out.stdout.strip().split("\t")
    assert status == "failed" and Pay.find(new_id).retried_from == failed.run_id
    outage["on"] = False
    out = runner.invoke(app, ["runs", "retry", failed.run_id or "", "--json"])
    assert out.exit_code == 0, out.output
    assert '"status": "completed"' in out.stdout and failed.run_id in out.stdout
    done = Twin.run(order_id="o-1")
    out = runner.invoke(app, ["runs", "retry", done.run_id or ""])
    assert out.exit_code == 1 and "only a failed or cancelled run" in out.stderr
    assert out.stdout == ""
    out = runner.invoke(app, ["runs", "retry", "nope"])
    assert out.exit_code == 1 and "no stored run 'nope'" in out.stderr
    out = runner.invoke(app, ["runs", "retry", "x", "--import", "no_such_module_xyz"])
    assert out.exit_code == 2 and "cannot import" in out.stderr


def test_the_examples_of_docs_run_control_run_as_written() -> None:
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    blocks = re.findall(r"```python\n(.*?)```", (root / "docs" / "run-control.md").read_text(),
                        re.DOTALL)
    # idempotency keys, retry, interrupts, interrupt timeouts, cancel, async_reactor
    assert len(blocks) == 6
    for block in blocks:
        done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True,
                              timeout=120, check=False, cwd=root)
        assert done.returncode == 0, done.stderr
