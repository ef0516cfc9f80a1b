"""The ``run_deadline`` timer job never rolls a run back under a definition that lacks one of
its completed steps (reactor/jobs/handlers/run_deadline.py; docs/deploys.md, "Compatibility
rules"; docs/concepts.md, "Run deadlines")."""

from __future__ import annotations

from typing import Any

from reactor import DispatchHandle, Reactor, registry, step
from reactor.model.status import RunStatus


def test_a_deadline_passing_under_a_definition_that_lacks_a_completed_step_never_skips_its_undo(
) -> None:
    """The deadline's timer job rolled a run back under a definition in which a completed
    step was renamed: the undo was reported unknown and skipped for good (found by an outside
    attack). The timer now leaves such a run as it is (logged); the deadline stands, and the
    run is rolled back, its undo run once, when the definition it was started with is back."""
    from datetime import UTC, datetime

    from reactor import sleep
    from reactor.testing import TestEnvironment

    events: list[str] = []

    def version(completed: str) -> type[Reactor]:
        registry.unregister("test_compatibility.deadline")

        def reserve(inputs: Any, ctx: Any) -> int:
            events.append(f"run {completed}")
            return 1

        def release(result: Any, inputs: Any, ctx: Any) -> None:
            events.append(f"undo {completed}")

        first = step(reserve)
        first.undo(release)
        namespace: dict[str, Any] = {
            "__module__": __name__, "deadline": 600, completed: first,
            "nap": sleep(seconds=60, wait_for=completed),
            "charge": step(lambda inputs, ctx: "done", wait_for="nap"),
        }
        return type("Checkout", (Reactor,), namespace, name="test_compatibility.deadline")

    try:
        with TestEnvironment(start=datetime(2029, 1, 1, tzinfo=UTC).timestamp()) as env:
            v1 = version("reserve")
            handle = v1.run()
            assert isinstance(handle, DispatchHandle)
            env.run_pending()  # sleeping at nap
            v2 = version("hold")  # 'reserve' renamed: its undo is not declared any more
            env.clock.advance(60)
            env.run_pending()
            assert v2.find(handle.run_id).status is RunStatus.NEEDS_VERSION
            env.clock.advance(700)  # past the deadline: its timer job runs under v2
            env.run_pending()
            env.sweep()
            env.run_pending()
            assert v2.find(handle.run_id).status is RunStatus.NEEDS_VERSION
            assert events == ["run reserve"]  # nothing rolled back under v2
            v1 = version("reserve")
            v1.resume_version(handle.run_id)
            env.run_pending()
            view = v1.find(handle.run_id)
    finally:
        registry.unregister("test_compatibility.deadline")
    assert view.status is RunStatus.FAILED
    assert view.failure is not None
    assert view.failure.exception_class == "reactor.errors.RunDeadlineExceeded"
    assert view.failure.rollback_failures == []
    assert events == ["run reserve", "undo reserve"]
