"""What stops a run without failing it (docs/architecture.md, "Execution invariants";
docs/concepts.md, "Rollback"): interruptions, and a park giving a worker thread back.

Shared by :mod:`reactor.engine.invoke` (calling user code) and
:mod:`reactor.engine.coroutines` (running an ``async def`` body), which both let these through
instead of turning them into a step's ``Failure``.
"""

from __future__ import annotations

import asyncio

from reactor.engine.parks import Park

__all__ = ["INTERRUPTIONS", "PASS_THROUGH"]

#: Exceptions that interrupt a run instead of failing it (no rollback; status ``aborted``).
INTERRUPTIONS: tuple[type[BaseException], ...] = (
    KeyboardInterrupt,
    SystemExit,
    GeneratorExit,
    MemoryError,
    asyncio.CancelledError,
)

#: What user code may raise that is no failure of its step: the interruptions, and a park
#: (user code inside a worker parked: :mod:`reactor.engine.parks`).
PASS_THROUGH: tuple[type[BaseException], ...] = (*INTERRUPTIONS, Park)
