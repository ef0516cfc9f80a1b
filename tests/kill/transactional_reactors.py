"""The reactor of the transactional-step kill tests (``--import tests.kill.transactional_reactors``,
imported by :mod:`tests.kill.transactional_points`, which the worker processes import).

The fault injection itself lives in :mod:`tests.kill.transactional_points`, which only worker
processes import: it registers a hook in :data:`AFTER_INSERT` and wraps the PostgreSQL step
transaction's ``commit``. This module is plain reactor code, safe to import anywhere (the test
process submits the runs with it).

:class:`TransactionalFlow` is ``a -> b -> c``, all three transactional steps, run in a worker
(docs/workers.md, "Background runs"). Every body appends ``start:<step>:<pid>`` to an
``O_APPEND`` log file (so body executions are counted across processes, rolled back or not),
then inserts one row ``(run_id, step, attempt, pid)`` into the ``ledger`` table of the run's
schema through ``ctx.transaction``, then calls the hooks of :data:`AFTER_INSERT` (none outside
the workers that import the fault points).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from psycopg import sql

from reactor import Background, Input, Reactor, input, step
from tests.kill.reactors import record

__all__ = ["AFTER_INSERT", "LEDGER_COLUMNS", "STEPS", "TransactionalFlow", "ledger_table"]

#: The steps of :class:`TransactionalFlow`, in order.
STEPS = ("a", "b", "c")

#: The columns of the ledger table (the test creates it in the run's schema).
LEDGER_COLUMNS = "run_id text NOT NULL, step text NOT NULL, attempt int NOT NULL, pid int NOT NULL"

#: Called as ``hook(inputs, ctx)`` by every body right after its INSERT, inside its open
#: transaction: :mod:`tests.kill.transactional_points` registers its fault point here.
AFTER_INSERT: list[Callable[[Any, Any], None]] = []


def ledger_table(schema: str) -> sql.Composed:
    """The ledger table of ``schema``, quoted."""
    return sql.SQL("{}.ledger").format(sql.Identifier(schema))


def _body(name: str) -> Callable[[Any, Any], str]:
    def run(inputs: Any, ctx: Any) -> str:
        record(inputs.log_path, f"start:{name}:{os.getpid()}")
        ctx.transaction.execute(
            sql.SQL("INSERT INTO {} (run_id, step, attempt, pid) VALUES (%s, %s, %s, %s)")
            .format(ledger_table(inputs.schema)),
            (ctx.run_id, name, ctx.attempt, os.getpid()),
        )
        for hook in AFTER_INSERT:
            hook(inputs, ctx)
        return name

    run.__name__ = run.__qualname__ = f"run_{name}"
    return run


def _args() -> dict[str, Any]:
    return {
        "schema": input("schema"),
        "log_path": input("log_path"),
        "arm_path": input("arm_path"),
        "kill_at": input("kill_at"),
    }


class TransactionalFlow(Reactor, name="kill.transactional_flow"):
    """a -> b -> c, each transactional, all in a worker. ``kill_at`` names the fault point of
    :mod:`tests.kill.transactional_points` (step ``b``'s), armed while ``arm_path`` exists."""

    schema = Input(str)
    log_path = Input(str)
    arm_path = Input(str)
    kill_at = Input(str)
    background = Background(all=True)

    a = step(_body("a"), transaction=True, **_args())
    b = step(_body("b"), transaction=True, wait_for="a", **_args())
    c = step(_body("c"), transaction=True, wait_for="b", **_args())
