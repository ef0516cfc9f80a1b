"""Assertions shared by the fan-out map tests on every adapter (docs/fan_out.md)."""

from __future__ import annotations

from collections import Counter

from reactor import Failure, RollbackFailure
from tests.kill.map_reactors import BATCH_SIZE
from tests.kill.reactors import entries

__all__ = ["assert_atomic_137", "assert_atomic_failure", "assert_undone_once", "undo_failure"]


def undo_failure(index: int) -> RollbackFailure:
    """The rollback failure of element ``index`` whose undo raised (``undo_fail_at``)."""
    return RollbackFailure(
        step="work", kind="undo", reason="raised",
        message=f"RuntimeError: undo of element {index} failed",
        map_step="m", element_index=index,
    )


def assert_undone_once(log: str, *, undo_fails: int = -1, reruns: frozenset[int] = frozenset()
                       ) -> set[int]:
    """Every element that completed was undone exactly once (its undo *completed* once; the
    element whose undo raises started once and never completed; an element in ``reruns`` — cut
    off by a kill — started twice). Returns the completed elements."""
    lines = Counter(entries(log))
    done = {int(k.split(":")[1]) for k in lines if k.startswith("done:")}
    assert all(lines[f"done:{i}"] == 1 for i in done), "an element ran twice"
    undone = {int(k.split(":")[1]) for k in lines if k.startswith("undo-done:")}
    started = {int(k.split(":")[1]) for k in lines if k.startswith("undo-start:")}
    expected = done - {undo_fails}
    assert undone == expected, (sorted(undone ^ expected)[:20], len(undone), len(expected))
    assert all(lines[f"undo-done:{i}"] == 1 for i in undone), [
        i for i in undone if lines[f"undo-done:{i}"] != 1
    ]
    assert started == done
    for i in started:
        assert lines[f"undo-start:{i}"] == (2 if i in reruns else 1), (i, lines[f"undo-start:{i}"])
    return done


def assert_atomic_failure(result: object, log: str, *, fail_at: int, undo_fail_at: int = 5,
                          reruns: frozenset[int] = frozenset()) -> None:
    """The map failed at element ``fail_at`` (``atomic``): the run failed at the map step with
    exactly the undo failure of element ``undo_fail_at``, and every completed element was undone
    once."""
    assert isinstance(result, Failure), result
    assert result.step_name == "m"
    assert f"element {fail_at} failed" in result.message
    assert result.rollback_failures == [undo_failure(undo_fail_at)]
    done = assert_undone_once(log, undo_fails=undo_fail_at, reruns=reruns)
    # a throw's last element claims the next throw: the last element of every throw before the
    # failing element's completed before it started
    last_of_earlier_throws = set(range(BATCH_SIZE - 1, fail_at - fail_at % BATCH_SIZE, BATCH_SIZE))
    assert last_of_earlier_throws and last_of_earlier_throws <= done and fail_at not in done
    assert Counter(entries(log))[f"fail:{fail_at}"] == 1


def assert_atomic_137(result: object, log: str, *, reruns: frozenset[int] = frozenset()) -> None:
    """The 200-element map failed at element 137 (``atomic``): the run failed at the map step
    with exactly the undo failure of element 5, and every completed element was undone once
    (49 and 99, the last elements of the first two throws, among them)."""
    assert_atomic_failure(result, log, fail_at=137, undo_fail_at=5, reruns=reruns)
