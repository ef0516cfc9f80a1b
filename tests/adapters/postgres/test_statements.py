"""What a run costs on PostgreSQL with the generic layer (docs/adapters/postgres.md, "Measured
figures"): every store operation is one SQL statement (one round trip), and a synchronous run
of N steps costs at most five statements per checkpoint (N + 1 checkpoints)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from reactor import Input, Reactor, config, input, step

pytestmark = pytest.mark.postgres


class Three(Reactor, name="test_pg_statements.three"):
    returns = "c"
    n = Input(int)

    @step(n=input("n"))
    def a(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) + 1

    @step(after="a")
    def b(inputs: Any, ctx: Any) -> int:
        return int(ctx.results["a"]) + 1

    @step(after="b")
    def c(inputs: Any, ctx: Any) -> int:
        return int(ctx.results["b"]) + 1


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[], object]], int]:
    """``of(fn)``: the SQL statements ``fn`` sends, counted at ``Connection.execute``."""
    sent = [0]
    real = psycopg.Connection.execute

    def counting(self: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
        sent[0] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", counting)

    def of(fn: Callable[[], object]) -> int:
        before = sent[0]
        fn()
        return sent[0] - before

    return of


@pytest.fixture
def configured(schema_url: str) -> Iterator[None]:
    config.configure(storage=schema_url, router="inline://")
    yield
    config.reset()


def test_a_sync_run_costs_at_most_five_statements_per_checkpoint(
    configured: None, statements: Callable[[Callable[[], object]], int]
) -> None:
    Three.run(n=0)  # the schema migrated, the clock calibrated, the pool warm
    result: list[Any] = []
    sent = statements(lambda: result.append(Three.run(n=1)))
    assert result[0].value == 4
    assert 4 <= sent <= 5 * 4, sent  # the start + 3 steps: 4 checkpoints
