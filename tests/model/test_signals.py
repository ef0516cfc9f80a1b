"""Signals are BaseExceptions raised only inside a step body (docs/concepts.md,
"Results and signals")."""

from __future__ import annotations

import pytest

from reactor.errors import SignalOutsideStepError
from reactor.model.results import Failure, Halt, Skipped, Success
from reactor.model.signals import StepSignal, fail, halt, listening, skip, succeed


def test_signal_is_not_an_exception() -> None:
    assert issubclass(StepSignal, BaseException) and not issubclass(StepSignal, Exception)


def test_signals_carry_their_result_inside_a_body() -> None:
    cases = [
        (lambda: fail("e", retryable=False), Failure("e", retryable=False)),
        (lambda: halt("h"), Halt("h")),
        (lambda: skip(1), Skipped(1)),
        (lambda: succeed(2), Success(2)),
    ]
    for call, expected in cases:
        with listening(), pytest.raises(StepSignal) as caught:
            call()
        assert caught.value.result == expected


def test_signals_outside_a_body_raise_a_clear_error() -> None:
    for call in (lambda: fail("e"), lambda: halt(), lambda: skip(), lambda: succeed()):
        with pytest.raises(SignalOutsideStepError):
            call()
