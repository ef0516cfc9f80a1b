"""Result values and their codec round trip (docs/concepts.md, "Results and signals")."""

from __future__ import annotations

from decimal import Decimal

import pytest

from reactor.model import codec
from reactor.model.results import (
    Failure,
    Halt,
    MapResults,
    Result,
    RollbackFailure,
    Skipped,
    Success,
)


def test_halt_and_skipped_are_successes() -> None:
    h, s = Halt("why"), Skipped(3)
    assert isinstance(h, Success) and isinstance(s, Success)
    assert h.success and h.halted and not h.skipped and not h.failed
    assert s.success and s.skipped and s.value == 3
    f = Failure("x")
    assert f.failed and not f.success and isinstance(f, Result)


def test_run_id_is_not_part_of_equality() -> None:
    assert Success(1).with_run_id("a") == Success(1)
    assert Success(1).with_run_id("a").run_id == "a"
    assert Halt("r", step_name="s").with_run_id("x") == Halt("r", step_name="s")


def test_failure_retryability() -> None:
    class Permanent(Exception):
        retryable = False

    assert Failure("x").is_retryable
    assert not Failure("x", retryable=False).is_retryable
    assert not Failure(Permanent()).is_retryable
    assert Failure(ValueError("v")).exception_class == "ValueError"
    assert Failure(ValueError("v")).message == "v"


@pytest.mark.parametrize(
    "value",
    [
        Success({"amount": Decimal("1.5")}),
        Halt("stop", step_name="s"),
        Skipped([1, 2]),
        Failure("boom", retryable=False, step_name="s", reactor_name="r",
                inputs={"token": "[REDACTED]"}, validation_errors={"a": ["bad"]},
                rollback_failures=[RollbackFailure("s", "undo", "raised", "m", "map", 2)]),
        MapResults([Success(1), Failure("f")]),
    ],
)
def test_results_round_trip_through_the_codec(value: object) -> None:
    back = codec.loads(codec.dumps(value))
    assert back == value and type(back) is type(value)


def test_stored_failure_keeps_message_and_class_not_the_exception() -> None:
    back = codec.loads(codec.dumps(Failure(KeyError("k"))))
    assert back.error == "'k'" and back.exception_class == "KeyError"


def test_map_results_helpers() -> None:
    results = MapResults([Success("a"), Failure("no"), Success("c")])
    assert results.values() == ["a", "c"]
    assert results.failures() == [Failure("no")]
    assert results.successes() == [Success("a"), Success("c")]
    assert results.failed_indexes() == [1]
    assert results[0] == Success("a") and len(results) == 3
    assert results == [Success("a"), Failure("no"), Success("c")]
