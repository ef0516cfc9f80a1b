"""Deterministic ``SIGKILL`` points around a transactional step's ``COMMIT`` inside real worker
processes (``--import tests.kill.transactional_points``; the product has no test hook, this
module wraps ``PostgresStepTransaction.commit`` when a worker imports it).

Only the kill tests' worker processes import this module (it refuses to load under pytest, so
it never changes the test process). A point fires once per run: while the run's ``arm_path``
file exists and its log holds no ``kill:`` line, it logs ``kill:<point>:<pid>`` and then the
process sends itself ``SIGKILL``. Every point belongs to step ``b`` of
:class:`~tests.kill.transactional_reactors.TransactionalFlow` (its ``kill_at`` input names it);
everything else passes straight through.

* ``body``: in ``b``'s body, right after its INSERT (the transaction is open, nothing of the
  step is committed).
* ``before-commit``: the engine wrote ``b``'s checkpoint inside the transaction and calls
  ``commit``: the process dies before the real ``COMMIT`` is sent.
* ``after-commit``: the real ``COMMIT`` returned: the process dies before anything else (the
  next step never starts).
* ``racing-commit``: a thread of the process sends ``SIGKILL`` while the real ``COMMIT`` is in
  flight; the kill may land on either side of it. If the commit returns first, the step's
  thread waits for the kill.

Recovery follows the dead worker's liveness lease lapsing (docs/coordination.md, "Renewal and
loss"; docs/workers.md).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

from reactor_postgres.transactions import PostgresStepTransaction

from tests.kill.reactors import BLOCK_LIMIT, entries, record
from tests.kill.transactional_reactors import AFTER_INSERT, TransactionalFlow

if "pytest" in sys.modules:  # pragma: no cover - a guard, never taken by the worker processes
    raise ImportError("tests.kill.transactional_points is for worker processes (--import) only")

__all__: list[str] = []

#: The step whose transaction the points kill.
STEP = "b"

_commit = PostgresStepTransaction.commit

#: ``id(connection)`` -> (the connection, the run's inputs), for ``b``'s transaction whose body
#: succeeded and whose commit is not called yet.
_pending: dict[int, tuple[object, Any]] = {}
_pending_lock = threading.Lock()


def _armed(inputs: Any, point: str) -> bool:
    return (
        inputs.kill_at == point
        and os.path.exists(inputs.arm_path)
        and not any(line.startswith("kill:") for line in entries(inputs.log_path))
    )


def _die() -> None:
    """``SIGKILL`` this process; never returns."""
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(BLOCK_LIMIT)  # pragma: no cover - the kill is delivered before this runs
    raise AssertionError("SIGKILL did not kill the worker")  # pragma: no cover


def _after_insert(inputs: Any, ctx: Any) -> None:
    if ctx.reactor != TransactionalFlow.definition.name or ctx.step != STEP:
        return
    if _armed(inputs, "body"):
        record(inputs.log_path, f"kill:body:{os.getpid()}")
        _die()
    with _pending_lock:
        _pending[id(ctx.transaction)] = (ctx.transaction, inputs)


def _marked(transaction: PostgresStepTransaction) -> Any:
    """The inputs of the run whose step ``b`` owns ``transaction`` (``None``: not ``b``'s)."""
    try:
        conn = transaction.connection
    except RuntimeError:
        return None  # already over: the real commit says so
    with _pending_lock:
        found = _pending.get(id(conn))
        if found is None or found[0] is not conn:
            return None
        del _pending[id(conn)]
    return found[1]


def _race() -> threading.Thread:
    """Start a thread that sends ``SIGKILL`` to the process at once, and return it."""
    go = threading.Event()

    def kill() -> None:
        go.wait()
        os.kill(os.getpid(), signal.SIGKILL)

    killer = threading.Thread(target=kill, name="racing-sigkill", daemon=True)
    killer.start()
    go.set()
    return killer


def _killing_commit(self: PostgresStepTransaction) -> None:
    inputs = _marked(self)
    if inputs is None:
        _commit(self)
        return
    for point in ("before-commit", "after-commit", "racing-commit"):
        if _armed(inputs, point):
            break
    else:
        _commit(self)
        return
    record(inputs.log_path, f"kill:{point}:{os.getpid()}")
    if point == "before-commit":
        _die()  # b's checkpoint is written in the transaction; COMMIT is never sent
    if point == "racing-commit":
        killer = _race()  # lands while the real COMMIT below is in flight (or around it)
        _commit(self)
        killer.join(BLOCK_LIMIT)  # the commit returned first: the kill is on its way
        raise AssertionError("the racing SIGKILL did not kill the worker")  # pragma: no cover
    _commit(self)
    _die()


PostgresStepTransaction.commit = _killing_commit  # type: ignore[method-assign]
AFTER_INSERT.append(_after_insert)
