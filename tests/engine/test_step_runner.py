"""The leaf step runner: retry policy precedence and outcomes (docs/concepts.md, "Retries")."""

from __future__ import annotations

from typing import Any

from reactor import Step
from reactor.dsl import Retries, step
from reactor.dsl.retries import NO_RETRIES
from reactor.engine.step_runner import retry_policy


class WithPolicy(Step):
    retries = Retries(max_attempts=4)

    def run(self) -> None:
        return None


def _fn(inputs: Any, ctx: Any) -> None:
    return None


def test_retry_policy_precedence() -> None:
    assert retry_policy(step(WithPolicy)) == Retries(max_attempts=4)
    assert retry_policy(step(WithPolicy, retries=Retries(max_attempts=2))) == Retries(
        max_attempts=2
    )
    assert retry_policy(step(_fn)) is NO_RETRIES
    assert retry_policy(step(_fn, retries=Retries(max_attempts=3))).max_attempts == 3
