"""Restoring a quarantined run once its cause is fixed (reactor/engine/quarantine.py,
``restore``; docs/run-control.md, "Restoring a quarantined run").

A worker quarantines a run whose stored document does not decode: a codec type this process
has not registered, a secret sealed with a key it is not configured with. After the fix, the
original record (base and segments, original status) is put back and the run sweeper continues
it; while it still does not decode, the restore is refused and nothing is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from reactor import (
    Background,
    FanOut,
    Input,
    Reactor,
    config,
    element,
    input,
    map_step,
    registry,
    result,
    step,
)
from reactor.config import Runtime
from reactor.engine.checkpoint import load_context
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.env import make_env
from reactor.engine.quarantine import quarantine, quarantine_info, restore
from reactor.errors import (
    DeserializationError,
    QuarantineRestoreError,
    RunNotFoundError,
    RunStateError,
    UnknownReactorError,
)
from reactor.jobs.sweepers import sweep_runs
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, ManualClock, MemoryStorage
from reactor.model import codec
from reactor.model.records import ContextRecord
from reactor.model.secrets import generate_key
from reactor.model.status import RunStatus

SECRET = "tok_visa_RESTORE_4242"
CORRUPT = '{"schema_version": "1", "status": "running", "context_id": 4'  # cut short

seen: list[str] = []


@dataclasses.dataclass(frozen=True)
class Parcel:
    """A step result of a type the codec knows only once registered (no Input declares it)."""

    label: str


_TAG = "test_quarantine_restore.Parcel"


class Shipping(Reactor, name="test_quarantine_restore.shipping"):
    """Makes a Parcel in the caller, then continues in a worker (base + segments stored)."""

    background = Background(after="pack")

    @step()
    def pack(inputs: Any, ctx: Any) -> Parcel:
        return Parcel("box-1")

    @step(parcel=result("pack"))
    def label(inputs: Any, ctx: Any) -> str:
        seen.append(f"label:{inputs.parcel.label}")
        return f"{inputs.parcel.label}/labelled"

    @step(labelled=result("label"))
    def ship(inputs: Any, ctx: Any) -> str:
        seen.append(f"ship:{inputs.labelled}")
        return "shipped"

    returns = "ship"


class Charging(Reactor, name="test_quarantine_restore.charging"):
    """Holds a sealed secret; runs in a worker."""

    card_token = Input(str, redact=True)
    background = Background(all=True)

    @step(card_token=input("card_token"))
    def charge(inputs: Any, ctx: Any) -> str:
        seen.append(f"charge:{inputs.card_token}")
        return "charged"


class Doubler(Reactor, name="test_quarantine_restore.doubler"):
    n = Input(int)

    @step(n=input("n"))
    def double(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) * 2

    returns = "double"


class Owner(Reactor, name="test_quarantine_restore.owner"):
    items = Input(list)
    doubled = map_step(Doubler, source=input("items"), args={"n": element("doubled")},
                       fan_out=FanOut(batch_size=10))


@pytest.fixture
def rt() -> Iterator[Runtime]:
    seen.clear()
    if not codec.is_registered(Parcel):
        codec.register_dataclass(Parcel, tag=_TAG)
    clock = ManualClock(1_700_000_000.0)
    runtime = config.configure(storage=MemoryStorage(clock=clock), router=LocalRouter(clock=clock))
    yield runtime
    config.reset()
    if not codec.is_registered(Parcel):
        codec.register_dataclass(Parcel, tag=_TAG)


def _rekey(runtime: Runtime, *keys: str) -> Runtime:
    """The same backends with other secret keys (an operator redeploying with the right key)."""
    return config.configure(storage=runtime.storage, router=runtime.router, secret_keys=keys)


def _quarantined_parcel_run(rt: Runtime) -> tuple[str, ContextRecord]:
    """A Shipping run a worker quarantined because ``Parcel`` was not registered; returns the
    run id and the record as it was before the quarantine."""
    handle = Shipping.run()
    assert isinstance(handle, DispatchHandle)
    before = rt.storage.contexts.load(handle.run_id)
    assert before is not None and before.status == "running"
    codec.unregister(Parcel)  # a worker deployed without the module that registers it
    worker = Worker(rt, liveness_wait=0.0)
    assert worker.run_pending() == 1 and worker.jobs_dead_lettered == 1
    assert Shipping.find(handle.run_id).status is RunStatus.FAILED
    return handle.run_id, before


def test_a_run_quarantined_for_an_unregistered_type_is_restored_and_finishes(
    rt: Runtime,
) -> None:
    run_id, before = _quarantined_parcel_run(rt)
    assert before.segments  # the checkpoints after the base are restored too
    quarantined = rt.storage.contexts.load(run_id)
    with pytest.raises(QuarantineRestoreError) as info:  # still unregistered: refused
        restore(make_env(rt), run_id)
    assert info.value.field == "original_document" and info.value.run_id == run_id
    assert "unknown codec tag" in info.value.reason and "nothing was written" in str(info.value)
    assert rt.storage.contexts.load(run_id) == quarantined

    codec.register_dataclass(Parcel, tag=_TAG)  # the fix
    restored = restore(make_env(rt), run_id)
    assert (restored.run_id, restored.reactor, restored.status) == (
        run_id, "test_quarantine_restore.shipping", RunStatus.RUNNING)
    assert restored.segments == len(before.segments)
    assert "unknown codec tag" in restored.reason
    record = rt.storage.contexts.load(run_id)
    assert record is not None
    assert (record.status, record.document, record.segments) == (
        "running", before.document, before.segments)
    assert (record.created_at, record.parent_context_id) == (before.created_at, None)
    ctx = load_context(make_env(rt), run_id)
    assert ctx is not None and quarantine_info(ctx) is None
    # nothing re-enqueued it: the run sweeper finds it running and unlocked, a worker ends it
    assert seen == []
    assert sweep_runs(rt.storage, rt.router).redispatched == 1
    assert Worker(rt, liveness_wait=0.0).run_pending() == 1
    view = Shipping.find(run_id)
    assert view.status is RunStatus.COMPLETED and view.results["ship"] == "shipped"
    assert seen == ["label:box-1", "ship:box-1/labelled"]
    with pytest.raises(RunStateError, match="not quarantined"):  # restored once only
        restore(make_env(rt), run_id)


def test_a_run_quarantined_for_a_missing_key_is_restored_once_the_key_is_configured(
    rt: Runtime,
) -> None:
    key = generate_key("k1")
    runtime = _rekey(rt, key)
    handle = Charging.run(card_token=SECRET)
    assert isinstance(handle, DispatchHandle)
    runtime = _rekey(runtime, generate_key("other"))  # a worker with the wrong key
    assert Worker(runtime, liveness_wait=0.0).run_pending() == 1
    assert Charging.find(handle.run_id).status is RunStatus.FAILED
    with pytest.raises(QuarantineRestoreError) as info:
        restore(make_env(runtime), handle.run_id)
    assert info.value.reason.startswith("SecretKeyError")
    assert "no secret key with id 'k1'" in info.value.reason
    runtime = _rekey(runtime, generate_key("other"), key)  # the key is back
    restored = restore(make_env(runtime), handle.run_id)
    assert restored.status is RunStatus.RUNNING and restored.reason.startswith("SecretKeyError")
    record = runtime.storage.contexts.load(handle.run_id)
    assert record is not None and SECRET not in record.document  # still sealed at rest
    assert seen == []
    assert sweep_runs(runtime.storage, runtime.router).redispatched == 1
    assert Worker(runtime, liveness_wait=0.0).run_pending() == 1
    assert Charging.find(handle.run_id).status is RunStatus.COMPLETED
    assert seen == [f"charge:{SECRET}"]


def test_a_corrupt_original_is_never_restored(rt: Runtime) -> None:
    handle = Shipping.run()
    assert isinstance(handle, DispatchHandle)
    record = rt.storage.contexts.load(handle.run_id)
    assert record is not None
    rt.storage.contexts.save(replace(record, document=CORRUPT, segments=(), base="b"))
    Worker(rt, liveness_wait=0.0).run_pending()
    quarantined = rt.storage.contexts.load(handle.run_id)
    assert quarantined is not None and quarantined.status == "failed"
    with pytest.raises(QuarantineRestoreError) as info:
        restore(make_env(rt), handle.run_id)
    assert info.value.reason.startswith("DeserializationError")
    assert rt.storage.contexts.load(handle.run_id) == quarantined


def test_only_a_whole_kept_original_is_restored(rt: Runtime) -> None:
    env = make_env(rt)
    done = Doubler.run(n=1)
    record = rt.storage.contexts.load(done.run_id or "")
    assert record is not None
    big = '{"schema_version": "1", "pad": "' + "x" * 100_000  # unreadable and too large
    rt.storage.contexts.save(replace(record, document=big, segments=()))
    config.configure(storage=rt.storage, router=rt.router, max_context_bytes=80_000)
    assert quarantine(make_env(), done.run_id or "", DeserializationError("cut")) is not None
    with pytest.raises(QuarantineRestoreError, match="only the first 65536 characters") as info:
        restore(env, done.run_id or "")
    assert info.value.field == "original_document"


def test_restore_refuses_what_is_not_a_quarantined_top_level_run(rt: Runtime) -> None:
    env = make_env(rt)
    with pytest.raises(RunNotFoundError):
        restore(env, "no-such-run")
    done = Doubler.run(n=2)
    with pytest.raises(RunStateError, match="completed and not quarantined") as info:
        restore(env, done.run_id or "")
    assert info.value.status == "completed"
    record = rt.storage.contexts.load(done.run_id or "")
    assert record is not None
    rt.storage.contexts.save(replace(record, document=CORRUPT))  # unreadable, not quarantined
    with pytest.raises(RunStateError, match="no worker quarantined it yet"):
        restore(env, done.run_id or "")
    # a map element: its map settled it as failed
    from reactor.engine.maps.dispatcher import element_context_id

    handle = Owner.run(items=[1, 2])
    assert isinstance(handle, DispatchHandle)
    (meta,) = rt.storage.maps.scan()
    element_id = element_context_id(meta.map_id, 0)
    element_record = rt.storage.contexts.load(element_id)
    assert element_record is not None
    rt.storage.contexts.save(replace(element_record, status="running", document=CORRUPT))
    Worker(rt, liveness_wait=0.0).run_pending()
    assert Doubler.find(element_id).status is RunStatus.FAILED
    with pytest.raises(RunStateError, match="map element"):
        restore(env, element_id)


def test_restore_needs_the_reactor_registered(rt: Runtime) -> None:
    run_id, _ = _quarantined_parcel_run(rt)
    codec.register_dataclass(Parcel, tag=_TAG)
    assert registry.unregister(Shipping.reactor_name)
    try:
        with pytest.raises(UnknownReactorError):
            restore(make_env(rt), run_id)
    finally:
        registry.register(Shipping.reactor_name, Shipping)
    assert restore(make_env(rt), run_id).status is RunStatus.RUNNING
