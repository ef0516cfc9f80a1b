"""``Reactor.fork`` (docs/operations.md, "Pause, rewind, fork";
reactor/engine/run_control/fork.py): a new run from a step of an earlier one, the results
before it copied, the original left as it is, and no side effect ever undone twice (the fork's
undo stack holds only the steps it ran).
"""

from __future__ import annotations

from typing import Any

import pytest

from reactor import Input, Reactor
from reactor.dsl import input, step
from reactor.errors import ForkArgumentError, InputValidationError, RunNotFoundError, RunStateError
from reactor.model.results import Failure, Success
from reactor.model.status import RunStatus
from reactor.testing import TestEnvironment
from tests.engine.recovery_reactors import Journal, chain


def _held(flow: Any) -> str:
    out = flow.run()
    assert isinstance(out, Failure) and out.run_id is not None
    return out.run_id


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_fork_copies_the_results_before_its_step_and_owns_only_what_it_ran(kind: str) -> None:
    journal = Journal()
    with TestEnvironment():
        flow = chain(journal, kind=kind)
        run_id = _held(flow)
        journal.broken = False
        forked = flow.fork(run_id, from_step="c")
        assert isinstance(forked, Success) and forked.run_id != run_id
        fork_view = flow.find(forked.run_id)
        original = flow.find(run_id)
        assert fork_view.status is RunStatus.COMPLETED
        assert fork_view.results["a"] == original.results["a"]
        assert list(fork_view.undo_stack) == ["c"]  # a and b belong to the original
        assert fork_view.forked_from is not None
        assert (fork_view.forked_from.run_id, fork_view.forked_from.step) == (run_id, "c")
        assert original.status is RunStatus.FAILED_PAUSED  # left as it is
        # the original's rollback undoes its own steps once; the fork's undo only c
        assert isinstance(flow.cancel(run_id), Failure)
        assert flow.undo(forked.run_id).success
    assert journal.events == [
        "run a", "run b", "run c", "run c",
        "compensate c", "undo b", "undo a",  # the original's rollback
        "undo c",                           # the fork's: only what it ran
    ]


def test_an_input_patch_is_merged_and_validated() -> None:
    seen: list[Any] = []
    with TestEnvironment():
        class Ship(Reactor):
            on_failure = "pause"
            address = Input(dict)
            weight = Input(int, gt=0)

            @step(weight=input("weight"))
            def pack(inputs: Any, ctx: Any) -> int:
                return int(inputs.weight)

            @step(address=input("address"), wait_for=["pack"])
            def label(inputs: Any, ctx: Any) -> str:
                seen.append(dict(inputs.address))
                if "zip" not in inputs.address:
                    raise ValueError("no zip")
                return "labelled"

        out = Ship.run(address={"street": "Main 1"}, weight=3)
        assert isinstance(out, Failure) and out.run_id is not None
        forked = Ship.fork(out.run_id, from_step="label",
                           input_patch='{"address": {"zip": "12345"}}')
        assert isinstance(forked, Success)
        assert seen[-1] == {"street": "Main 1", "zip": "12345"}
        with pytest.raises(InputValidationError):
            Ship.fork(out.run_id, from_step="label", input_patch={"weight": -1})


def test_hostile_forks_are_refused_and_store_nothing() -> None:
    journal = Journal()
    with TestEnvironment() as env:
        flow = chain(journal)
        run_id = _held(flow)
        before = len(env.storage.contexts.page(limit=100).runs)
        with pytest.raises(RunNotFoundError):
            flow.fork("no-such-run", from_step="c")
        cases: list[tuple[dict[str, Any], str]] = [
            ({"from_step": "nope"}, "from_step"),
            ({"from_step": ""}, "from_step"),
            ({"from_step": "c", "input_patch": "{not json"}, "input_patch"),
            ({"from_step": "c", "input_patch": "[1, 2]"}, "input_patch"),
            ({"from_step": "c", "input_patch": {"ghost": 1}}, "input_patch"),
        ]
        for kwargs, field in cases:
            with pytest.raises(ForkArgumentError) as caught:
                flow.fork(run_id, **kwargs)
            assert caught.value.field == field
        with pytest.raises(ForkArgumentError, match="ghost"):
            flow.fork(run_id, from_step="c", input_patch={"ghost": 1})
        assert len(env.storage.contexts.page(limit=100).runs) == before
        assert flow.find(run_id).status is RunStatus.FAILED_PAUSED
    assert journal.events == ["run a", "run b", "run c"]


def test_a_rolled_back_run_cannot_be_forked() -> None:
    journal = Journal()
    with TestEnvironment():
        flow = chain(journal, on_failure=None)
        out = flow.run()
        assert isinstance(out, Failure) and out.run_id is not None
        with pytest.raises(RunStateError) as caught:
            flow.fork(out.run_id, from_step="c")
        assert caught.value.status == "failed" and "retry" in str(caught.value)
