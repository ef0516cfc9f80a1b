"""Assertions on stored runs: outcome, rollback order and trace (docs/testing.md,
"Assertions").

Every function takes a *run reference*: a run id, the ``Success``/``Failure`` a run returned
(they carry ``run_id``), a :class:`reactor.DispatchHandle` or a :class:`reactor.RunView`. The
run is read afresh from the active runtime's storage (``Reactor.find`` for a run of any
reactor), so a background run is seen as the workers left it. A failed assertion raises
``AssertionError`` whose message shows the run's status, failure and trace.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from reactor.config import Runtime
from reactor.engine.api import find
from reactor.engine.dispatch import DispatchHandle
from reactor.model.results import Failure, Result
from reactor.model.run_view import RunView
from reactor.model.status import RunStatus

__all__ = [
    "ROLLBACK_EVENTS",
    "RunRef",
    "assert_completed",
    "assert_failed",
    "assert_rolled_back",
    "assert_trace",
    "rollback_order",
    "run_view",
    "step_events",
]

#: A run reference: a run id, a returned result, a dispatch handle or a view.
RunRef = str | Result | DispatchHandle | RunView

#: The trace entry types that are part of a rollback, in the order the engine writes them.
ROLLBACK_EVENTS: frozenset[str] = frozenset(
    {"compensate", "compensate_failure", "undo", "undo_failure"}
)


def _run_id(ref: RunRef) -> str:
    if isinstance(ref, str):
        return ref
    run_id = ref.run_id
    if not run_id:
        raise ValueError(f"{ref!r} carries no run id (a result built by hand?)")
    return run_id


def run_view(ref: RunRef, *, runtime: Runtime | None = None) -> RunView:
    """Read a stored run of any reactor.

    Args:
        ref: the run reference (module docstring).
        runtime: where the run is stored (default: the active runtime, e.g. the one a
            ``TestEnvironment`` installed).

    Returns:
        The run's :class:`reactor.RunView`, read now.

    Raises:
        RunNotFoundError: no run is stored under that id.
        ValueError: ``ref`` is a result without a run id.
    """
    return find(None, _run_id(ref), runtime=runtime)


def step_events(
    ref: RunRef, *, types: Collection[str] | None = None, runtime: Runtime | None = None
) -> list[tuple[str, str | None]]:
    """The ordered ``(event type, step)`` pairs of a run's trace, oldest first.

    Types are those of :class:`reactor.TraceEntry` (``run``, ``failed``, ``retry``,
    ``compensate``, ``compensate_failure``, ``undo``, ``undo_failure``, ``halt``,
    ``skipped``). A composed child's own steps are in its own trace (``RunView.children``);
    each fan-out or map element is a run of its own.

    Args:
        ref: the run reference.
        types: keep only these event types (default: all).
        runtime: where the run is stored (default: the active runtime).

    Returns:
        e.g. ``[("run", "reserve"), ("failed", "charge"), ("compensate", "charge"),
        ("undo", "reserve")]``.
    """
    view = run_view(ref, runtime=runtime)
    return [(e.type, e.step) for e in view.trace if types is None or e.type in types]


def rollback_order(ref: RunRef, *, runtime: Runtime | None = None) -> list[str]:
    """The steps a run rolled back, in the order it rolled them back.

    That is the failed step first when its body started (its ``compensate``, defined or not),
    then every completed step undone, newest first; an undo or compensate that failed is
    listed too (docs/concepts.md, "Rollback").

    Args:
        ref: the run reference.
        runtime: where the run is stored (default: the active runtime).

    Returns:
        Step names, e.g. ``["charge", "reserve"]``; ``[]`` when nothing was rolled back.
    """
    return [step or "" for _, step in step_events(ref, types=ROLLBACK_EVENTS, runtime=runtime)]


def _explain(view: RunView) -> str:
    lines = [f"run {view.run_id} of {view.reactor!r} is {view.status.value}"]
    if view.failure is not None:
        failure = view.failure
        lines.append(
            f"failure: step {failure.step_name!r}: {failure.exception_class or 'error'}: "
            f"{failure.error}"
        )
        for problem in failure.rollback_failures:
            lines.append(f"rollback failure: {problem}")
    lines.append("trace:")
    lines.extend(
        f"  {e.type} {e.step}" + (f" (attempt {e.attempt})" if e.attempt else "")
        + (f": {e.detail}" if e.detail else "")
        for e in view.trace
    )
    return "\n".join(lines)


def assert_completed(ref: RunRef, *, runtime: Runtime | None = None) -> RunView:
    """Assert that a run completed.

    Args:
        ref: the run reference.
        runtime: where the run is stored (default: the active runtime).

    Returns:
        The run's view (its ``results`` hold each step's value).

    Raises:
        AssertionError: the run is in any other status; the message shows its failure and
            trace.
    """
    view = run_view(ref, runtime=runtime)
    if view.status is not RunStatus.COMPLETED:
        raise AssertionError(f"expected a completed run\n{_explain(view)}")
    return view


def _class_names(error: type[BaseException] | str) -> set[str]:
    if isinstance(error, str):
        return {error}
    return {error.__name__, error.__qualname__, f"{error.__module__}.{error.__qualname__}"}


def _same_class(recorded: str, wanted: str) -> bool:
    """Whether a recorded class name (``ValueError``, ``pkg.mod.Error``) names ``wanted``; a
    dotted name matches its own last segments (``builtins.ValueError`` ~ ``ValueError``)."""
    if not recorded or not wanted:
        return False
    return (recorded == wanted or recorded.endswith("." + wanted)
            or wanted.endswith("." + recorded))


def assert_failed(
    ref: RunRef,
    *,
    reason: str | None = None,
    step: str | None = None,
    error: type[BaseException] | str | None = None,
    runtime: Runtime | None = None,
) -> Failure:
    """Assert that a run failed (and was rolled back), optionally why and where.

    Args:
        ref: the run reference.
        reason: a text the failure's error message must contain.
        step: the step the failure must name (a compose or map step for a failure inside a
            child or element).
        error: the exception class the failure must record, or its name
            (``"ValueError"``, ``"myapp.errors.Declined"``).
        runtime: where the run is stored (default: the active runtime).

    Returns:
        The stored :class:`reactor.Failure` (its ``error`` is the message text,
        ``exception_class`` the class name, secrets redacted).

    Raises:
        AssertionError: the run did not fail, or its failure does not match; the message
            shows the failure and the trace.
    """
    view = run_view(ref, runtime=runtime)
    failure = view.failure
    if view.status is not RunStatus.FAILED or failure is None:
        raise AssertionError(f"expected a failed run\n{_explain(view)}")
    if reason is not None and reason not in str(failure.error):
        raise AssertionError(f"expected the failure to say {reason!r}\n{_explain(view)}")
    if step is not None and failure.step_name != step:
        raise AssertionError(
            f"expected the failure at step {step!r}, got {failure.step_name!r}\n"
            f"{_explain(view)}"
        )
    if error is not None:
        recorded = failure.exception_class or ""
        if not any(_same_class(recorded, name) for name in _class_names(error)):
            raise AssertionError(
                f"expected a {error if isinstance(error, str) else error.__name__} failure, "
                f"got {recorded or 'no exception class'}\n{_explain(view)}"
            )
    return failure


def assert_rolled_back(
    ref: RunRef, steps: Sequence[str], *, runtime: Runtime | None = None
) -> RunView:
    """Assert that a run was rolled back, and in exactly this order.

    The run must be ``failed`` (rolled back after a failure) or ``cancelled``
    (``Reactor.undo``), with nothing left on its undo stack, and :func:`rollback_order` must
    equal ``steps``.

    Args:
        ref: the run reference.
        steps: the expected order, e.g. ``["charge", "reserve"]``: the failed step (when its
            body started), then the completed steps newest first.
        runtime: where the run is stored (default: the active runtime).

    Returns:
        The run's view.

    Raises:
        AssertionError: another status, undo entries left, or another order; the message
            shows the actual order and the trace.
    """
    view = run_view(ref, runtime=runtime)
    if view.status not in (RunStatus.FAILED, RunStatus.CANCELLED):
        raise AssertionError(f"expected a rolled-back run\n{_explain(view)}")
    if view.undo_stack:
        raise AssertionError(
            f"expected an empty undo stack, still holds {list(view.undo_stack)}\n"
            f"{_explain(view)}"
        )
    actual = [e.step or "" for e in view.trace if e.type in ROLLBACK_EVENTS]
    if actual != list(steps):
        raise AssertionError(
            f"expected the rollback order {list(steps)}, got {actual}\n{_explain(view)}"
        )
    return view


def assert_trace(
    ref: RunRef,
    expected: Sequence[tuple[str, str | None]],
    *,
    types: Collection[str] | None = None,
    runtime: Runtime | None = None,
) -> RunView:
    """Assert a run's trace, as ``(event type, step)`` pairs, oldest first.

    Args:
        ref: the run reference.
        expected: the pairs :func:`step_events` must return, e.g. ``[("retry", "capture"),
            ("run", "capture")]``.
        types: compare only these event types (default: every entry).
        runtime: where the run is stored (default: the active runtime).

    Returns:
        The run's view.

    Raises:
        AssertionError: the trace differs; the message shows both.
    """
    view = run_view(ref, runtime=runtime)
    actual = [(e.type, e.step) for e in view.trace if types is None or e.type in types]
    if actual != [tuple(pair) for pair in expected]:
        raise AssertionError(
            f"expected the trace {list(expected)}\ngot {actual}\n{_explain(view)}"
        )
    return view
