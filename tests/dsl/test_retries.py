"""The Retries declaration (docs/concepts.md, "Retries")."""

from __future__ import annotations

from typing import Any

import pytest

from reactor.dsl import Retries
from reactor.errors import DefinitionError


def test_delays() -> None:
    assert [Retries(5, "exponential", 0.1).delay(n) for n in (1, 2, 3)] == pytest.approx(
        [0.1, 0.2, 0.4]
    )
    assert [Retries(5, "linear", 0.5).delay(n) for n in (1, 2, 3)] == [0.5, 1.0, 1.5]
    assert [Retries(5, "fixed", 2).delay(n) for n in (1, 2, 3)] == [2.0, 2.0, 2.0]


@pytest.mark.parametrize(
    "kwargs",
    [{"max_attempts": 0}, {"backoff": "random"}, {"base_delay": -1}, {"max_attempts": 1.5}],
)
def test_invalid_policies(kwargs: dict[str, Any]) -> None:
    with pytest.raises(DefinitionError):
        Retries(**kwargs)


def test_retries_errors_name_the_argument_and_value() -> None:
    from reactor import Background, Reactor, compose

    with pytest.raises(DefinitionError, match=r"max_attempts must be at least 1, got 0"):
        Retries(max_attempts=0)
    with pytest.raises(DefinitionError, match=r"got none: all=False, after=None, before=None"):
        Background()
    with pytest.raises(DefinitionError, match=r"got after and before: .*after='a'.*before='b'"):
        Background(after="a", before="b")

    class Child(Reactor, name="test_retries.child"):
        pass

    with pytest.raises(DefinitionError, match=r"compose\(.*Child\): retries=Retries"):
        compose(Child, retries=Retries(max_attempts=2))
