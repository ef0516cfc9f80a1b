"""Saving and loading contexts through storage.contexts (docs/concepts.md, "Stored runs")."""

from __future__ import annotations

import pytest

from reactor import config
from reactor.config import Runtime
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.env import make_env
from reactor.errors import ContextTooLargeError
from reactor.model.context import Context
from reactor.model.status import RunStatus


def test_save_writes_a_context_record_stamped_by_the_storage_clock(runtime: Runtime) -> None:
    env = make_env(runtime)
    ctx = Context(context_id="c1", reactor="r", status=RunStatus.RUNNING,
                  parent_context_id="p", root_context_id="root", inputs={"n": 1})
    Checkpointer(env, ctx).save()
    record = runtime.storage.contexts.load("c1")
    assert record is not None
    assert (record.reactor, record.status, record.parent_context_id, record.root_context_id) == (
        "r", "running", "p", "root"
    )
    assert record.created_at == ctx.created_at and record.updated_at == ctx.updated_at
    assert record.updated_at <= runtime.storage.now()
    assert '"schema_version":"1"' in record.document
    assert load_context(env, "c1") == ctx


def test_load_missing_context_returns_none(runtime: Runtime) -> None:
    assert load_context(make_env(runtime), "missing") is None


def test_too_large_context_is_refused_before_writing(runtime: Runtime) -> None:
    small = config.configure(storage=runtime.storage, router=runtime.router,
                             max_context_bytes=1024)
    env = make_env(small)
    ctx = Context(context_id="big", reactor="r", inputs={"blob": "x" * 4096})
    with pytest.raises(ContextTooLargeError):
        Checkpointer(env, ctx).save()
    assert small.storage.contexts.load("big") is None


def test_unforced_saves_respect_checkpoint_min_interval(runtime: Runtime) -> None:
    throttled = config.configure(storage=runtime.storage, router=runtime.router,
                                 checkpoint_min_interval=3600.0)
    env = make_env(throttled)
    ctx = Context(context_id="t", reactor="r", inputs={"v": 1})
    saver = Checkpointer(env, ctx)
    saver.save()
    ctx.inputs = {"v": 2}  # a new object: checkpoints track the log parts by identity
    saver.save(force=False)  # within the interval: skipped
    assert load_context(env, "t") is not None and load_context(env, "t").inputs == {"v": 1}  # type: ignore[union-attr]
    saver.save()  # forced
    assert load_context(env, "t").inputs == {"v": 2}  # type: ignore[union-attr]
