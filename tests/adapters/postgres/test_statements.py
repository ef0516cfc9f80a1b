"""What a run costs on PostgreSQL (docs/adapters/postgres.md, "Measured figures"): every store
operation is one SQL statement (one round trip); a step's checkpoint in the middle of a run is
exactly one (the piece and the head written together, against the head the store remembers
writing: reactor_postgres/contexts.py), and a 3-step synchronous run costs 8 in all."""

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


class Four(Reactor, name="test_pg_statements.four"):
    returns = "d"
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

    @step(after="c")
    def d(inputs: Any, ctx: Any) -> int:
        return int(ctx.results["c"]) + 1


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


def test_a_step_checkpoint_is_one_statement(
    configured: None, statements: Callable[[Callable[[], object]], int]
) -> None:
    Three.run(n=0)  # the schema migrated, the clock calibrated, the pool warm
    Four.run(n=0)
    result: list[Any] = []
    three = statements(lambda: result.append(Three.run(n=1)))
    four = statements(lambda: result.append(Four.run(n=1)))
    assert [r.value for r in result] == [4, 5]
    assert four - three == 1, (three, four)  # one step more: one statement more
    # the liveness lock's read and insert, the first save (base piece, head and listing row in
    # one statement), one per step (the last one with the listing row), the lock's read and
    # release
    assert three <= 8, three
