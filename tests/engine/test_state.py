"""RunState: trace entries and the step context handed to user code."""

from __future__ import annotations

import pytest

from reactor.config import Runtime
from reactor.dsl.definition import build_definition
from reactor.dsl.inputs import InputContract
from reactor.engine.checkpoint import Checkpointer
from reactor.engine.env import make_env
from reactor.engine.state import RunState
from reactor.model.context import Context
from reactor.model.run_records import MapMembership, TraceRecord


def _state(runtime: Runtime) -> RunState:
    env = make_env(runtime)
    ctx = Context(context_id="c", reactor="r", inputs={"token": "secret"},
                  intermediate_results={"a": 1},
                  map_metadata=MapMembership("lines", "m-1", 4, "orders"))
    definition = build_definition("r", "R", InputContract("R", []), {}, None)
    return RunState(definition, ctx, env, Checkpointer(env, ctx))


def test_trace_entries_carry_type_step_time_and_no_arguments(runtime: Runtime) -> None:
    state = _state(runtime)
    state.trace("run", "a", attempt=None, detail="ok")
    entry = state.ctx.execution_trace[0]
    assert state.ctx.execution_trace == [TraceRecord("run", "a", entry.at, {"detail": "ok"})]
    assert entry.to_stored() == {"type": "run", "step": "a", "at": entry.at, "detail": "ok"}


def test_step_context_is_read_only(runtime: Runtime) -> None:
    ctx = _state(runtime).step_context("b", attempt=2)
    assert (ctx.run_id, ctx.step, ctx.attempt, ctx.root_run_id) == ("c", "b", 2, "c")
    assert ctx.results["a"] == 1 and ctx.element_index == 4
    assert ctx.map_membership == MapMembership("lines", "m-1", 4, "orders")
    assert ctx.map_metadata == {"map_step": "lines", "map_id": "m-1", "index": 4,
                                "parent_reactor": "orders"}
    with pytest.raises(TypeError):
        ctx.map_metadata["index"] = 5  # type: ignore[index]
    with pytest.raises(TypeError):
        ctx.results["a"] = 2  # type: ignore[index]
