"""Incremental checkpoints (docs/protocol.md, "Incremental checkpoints"): a save appends what
changed since the last one; a load folds the base and its segments back into the same run."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactor import Reactor, config, generate_key, step
from reactor.config import Runtime
from reactor.engine.checkpoint import Checkpointer, load_context
from reactor.engine.env import make_env
from reactor.errors import StaleWriterError
from reactor.model import checkpoints, codec
from reactor.model.context import Context
from reactor.model.records import ContextDelta, ContextRecord, Fence
from reactor.model.run_records import RetryCounters, TraceRecord, UndoEntry
from reactor.model.status import RunStatus


class _Recording:
    """A context store that records the calls made to it (and forwards them); it has no
    ``append``: a store written before appends existed (it does not declare
    ``AppendsContexts``, a property of its class: docs/protocol.md, "Capabilities")."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.saves: list[ContextRecord] = []
        self.appends: list[ContextDelta] = []

    def save(self, record: ContextRecord, **fence: Any) -> None:
        self.saves.append(record)
        self.inner.save(record, **fence)

    def __getattr__(self, name: str) -> Any:
        if name == "append":
            raise AttributeError(name)
        return getattr(self.inner, name)


class _Appending(_Recording):
    """:class:`_Recording` that declares ``AppendsContexts`` (it records the appends too)."""

    def append(self, delta: ContextDelta, **fence: Any) -> bool:
        self.appends.append(delta)
        return bool(self.inner.append(delta, **fence))


@pytest.fixture
def recording(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> _Recording:
    store = _Appending(runtime.storage.contexts)
    monkeypatch.setattr(runtime.storage, "contexts", store)
    return store


def _document(ctx: Context) -> dict[str, Any]:
    return codec.decode_document(codec.encode_document(ctx.to_document()))


def test_a_run_is_saved_whole_once_then_appended_to(
    runtime: Runtime, recording: _Recording
) -> None:
    class R(Reactor):
        a = step(lambda inputs, ctx: {"a": 1})
        b = step(lambda inputs, ctx: [1, 2, 3])
        c = step(lambda inputs, ctx: "c")

    result = R.run()
    assert [r.status for r in recording.saves] == ["running"]
    assert [d.status for d in recording.appends] == ["running"] * 2 + ["completed"]
    assert [d.position for d in recording.appends] == [1, 2, 3]  # c's checkpoint completes it
    record = runtime.storage.contexts.load(result.run_id or "")
    assert record is not None and len(record.segments) == 3
    ctx = load_context(make_env(runtime), result.run_id or "")
    assert ctx is not None and ctx.intermediate_results == {"a": {"a": 1}, "b": [1, 2, 3],
                                                            "c": "c"}
    assert [e.step for e in ctx.undo_stack] == ["a", "b", "c"]
    assert ctx.undo_stack[1].result == [1, 2, 3]


def test_a_large_result_is_encoded_once(runtime: Runtime, recording: _Recording) -> None:
    blob = "x" * 1_000_000

    steps: dict[str, Any] = {"first": step(lambda inputs, ctx: blob)}
    steps.update({f"s{i}": step(lambda inputs, ctx: 1) for i in range(20)})
    R: Any = type("BigFirst", (Reactor,), steps)
    result = R.run()
    written = sum(len(r.document) for r in recording.saves) + sum(
        len(d.segment) for d in recording.appends
    )
    assert 1_000_000 < written < 1_100_000  # once, not once per checkpoint nor twice per step
    ctx = load_context(make_env(runtime), result.run_id or "")
    assert ctx is not None and ctx.intermediate_results["first"] == blob
    assert ctx.undo_stack[0].result == blob


def test_a_loaded_run_keeps_appending(runtime: Runtime, recording: _Recording) -> None:
    env = make_env(runtime)
    ctx = Context(context_id="resumed", reactor="r", status=RunStatus.RUNNING)
    Checkpointer(env, ctx).save()
    ctx.intermediate_results["a"] = 1
    Checkpointer(env, ctx).save()
    loaded = load_context(env, "resumed")
    assert loaded is not None
    loaded.intermediate_results["b"] = 2
    loaded.execution_trace.append(TraceRecord("run", "b", 1.0))
    Checkpointer(env, loaded).save()
    assert len(recording.saves) == 1 and [d.position for d in recording.appends] == [1, 2]
    again = load_context(env, "resumed")
    assert again is not None and _document(again) == _document(loaded)


def test_a_store_without_append_gets_whole_saves(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _Recording(runtime.storage.contexts)
    monkeypatch.setattr(runtime.storage, "contexts", store)

    class R(Reactor):
        a = step(lambda inputs, ctx: 1)
        b = step(lambda inputs, ctx: 2)

    result = R.run()
    assert [r.status for r in store.saves] == ["running", "running", "completed"]
    assert all(not r.segments for r in store.saves)
    assert R.find(result.run_id or "").results == {"a": 1, "b": 2}


def test_another_writers_save_turns_the_next_checkpoint_whole(
    runtime: Runtime, recording: _Recording
) -> None:
    env = make_env(runtime)
    mine = Context(context_id="shared", reactor="r", status=RunStatus.RUNNING)
    Checkpointer(env, mine).save()
    theirs = load_context(env, "shared")
    assert theirs is not None
    theirs.intermediate_results["theirs"] = 1
    Checkpointer(env, theirs).save()  # appended: position 1
    mine.intermediate_results["mine"] = 2
    Checkpointer(env, mine).save()  # position 1 is taken: saved whole, last writer wins
    assert [d.position for d in recording.appends] == [1, 1]
    assert len(recording.saves) == 2
    stored = load_context(env, "shared")
    assert stored is not None and stored.intermediate_results == {"mine": 2}


def test_a_stale_fenced_append_is_refused(runtime: Runtime) -> None:
    env = make_env(runtime)

    class Fenced(Checkpointer):
        token = 1

        def fence(self) -> Fence | None:
            return Fence(key="async:f", owner="o", token=self.token)

    ctx = Context(context_id="f", reactor="r", status=RunStatus.RUNNING)
    old = Fenced(env, ctx)
    old.save()
    newer = load_context(env, "f")
    assert newer is not None
    new_writer = Fenced(env, newer)
    new_writer.token = 2
    newer.intermediate_results["new"] = 1
    new_writer.save()
    ctx.intermediate_results["stale"] = 1
    with pytest.raises(StaleWriterError):
        old.save()
    stored = load_context(env, "f")
    assert stored is not None and stored.intermediate_results == {"new": 1}


def test_segments_past_the_size_limit_fold_into_a_whole_save(runtime: Runtime) -> None:
    small = config.configure(storage=runtime.storage, router=runtime.router,
                             max_context_bytes=4096)
    env = make_env(small)
    ctx = Context(context_id="limit", reactor="r", status=RunStatus.RUNNING)
    saver = Checkpointer(env, ctx)
    saver.save()
    for i in range(40):  # each head repeats ~300 bytes: segments pass 4 KiB, the run does not
        ctx.count_attempts("s", i)
        saver.save()
    record = small.storage.contexts.load("limit")
    assert record is not None and record.stored_bytes <= 4096
    loaded = load_context(env, "limit")
    assert loaded is not None and loaded.retry_context == RetryCounters({"s": 39})


# -------------------------------------------------------------- any change sequence folds back

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("result"), st.sampled_from("abcde"), st.integers()),
        st.tuples(st.just("drop"), st.sampled_from("abcde"), st.none()),
        st.tuples(st.just("push"), st.sampled_from("abcde"), st.integers()),
        st.tuples(st.just("pop"), st.none(), st.none()),
        st.tuples(st.just("trace"), st.sampled_from("abcde"), st.integers()),
        st.tuples(st.just("untrace"), st.none(), st.none()),
        st.tuples(st.just("inputs"), st.none(), st.integers()),
        st.tuples(st.just("status"), st.sampled_from(list(RunStatus)), st.none()),
        st.tuples(st.just("save"), st.none(), st.none()),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_any_sequence_of_changes_loads_back_equal(runtime: Runtime, ops: list[Any]) -> None:
    env = make_env(runtime)
    ctx = Context(context_id=f"seq-{id(ops)}", reactor="r", status=RunStatus.RUNNING)
    saver = Checkpointer(env, ctx)
    saver.save()
    for op, name, value in ops:
        if op == "result":
            ctx.intermediate_results.pop(name, None)  # replacing means re-inserting
            ctx.intermediate_results[name] = {"v": value}
        elif op == "drop":
            ctx.intermediate_results.pop(name, None)
        elif op == "push":
            shared = ctx.intermediate_results.get(name, value)
            ctx.undo_stack.append(UndoEntry(name, "step", {}, shared))
        elif op == "pop" and ctx.undo_stack:
            ctx.undo_stack.pop()
        elif op == "trace":
            ctx.execution_trace.append(TraceRecord("run", name, float(value)))
        elif op == "untrace" and ctx.execution_trace:
            ctx.execution_trace.pop()
        elif op == "inputs":
            ctx.inputs = {"n": value}
        elif op == "status":
            ctx.status = name
        else:
            saver.save()
            loaded = load_context(env, ctx.context_id)
            assert loaded is not None and _document(loaded) == _document(ctx)
    saver.save()
    loaded = load_context(env, ctx.context_id)
    assert loaded is not None and _document(loaded) == _document(ctx)
    record = runtime.storage.contexts.load(ctx.context_id)
    assert record is not None
    assert _document(Context.from_document(checkpoints.stored_document(record))) == _document(ctx)


def test_a_copied_context_saves_whole(runtime: Runtime, recording: _Recording) -> None:
    env = make_env(runtime)
    ctx = Context(context_id="copied", reactor="r", status=RunStatus.RUNNING)
    Checkpointer(env, ctx).save()
    assert ctx.persisted is not None
    copy = dataclasses.replace(ctx, status=RunStatus.COMPLETED)
    assert copy.persisted is None  # never shares the original's journal
    Checkpointer(env, copy).save()
    assert len(recording.saves) == 2 and recording.appends == []


def test_secrets_stored_before_a_key_was_configured_are_sealed_by_the_next_save(
    runtime: Runtime,
) -> None:
    storage = runtime.storage
    clear = make_env(config.configure(storage=storage, router="inline://"))  # in-process: clear
    ctx = Context(context_id="s", reactor="r", status=RunStatus.RUNNING,
                  inputs={"card": "4111-1111"}, redacted=["card"])
    Checkpointer(clear, ctx).save()
    keyed = make_env(config.configure(storage=storage, router="inline://",
                                      secret_keys=(generate_key(),)))
    loaded = load_context(keyed, "s")
    assert loaded is not None and loaded.persisted is None  # saved whole next time
    loaded.intermediate_results["a"] = 1
    Checkpointer(keyed, loaded).save()
    record = storage.contexts.load("s")
    assert record is not None
    assert all("4111-1111" not in text for text in (record.document, *record.segments))
