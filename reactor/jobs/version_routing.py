"""Routing a job to a worker whose definition can continue its run (docs/deploys.md, "Routing
by version").

**A claim check on delivery**, the same on every router (no per-version queue, no new router
operation): a worker that receives a ``run``, ``map_element`` or ``interrupt_timeout`` job for
a run its definition cannot continue (:func:`reactor.engine.compatibility.judge`) looks for a
live worker announcing the run's stored fingerprint (:mod:`reactor.jobs.announcements`). When
one is announced it **hands the job back**: re-enqueues it after :data:`HAND_BACK_DELAY`
seconds with ``hand_backs`` + 1, changing nothing stored, so another worker receives it. After
:data:`MAX_HAND_BACKS` hand-backs of one job, or when no such worker is announced (or the run
was stored before fingerprints), the job does what it did before routing: the run is stored
``needs_version`` with the reason.

**Held runs get going again** by themselves: every worker, when it announces (at start and at
every renewal), resumes the ``needs_version`` runs its definitions can continue
(:func:`resume_held`, through ``Reactor.resume_version``'s path; one page of held runs a
renewal, the next renewal paging on). A map element is not listed
by the run scan: its job, held, comes back every :data:`HELD_ELEMENT_DELAY` seconds, and a
worker that can continue it does.
"""

from __future__ import annotations

import threading
import weakref
from typing import Final

from reactor import registry
from reactor.config import Runtime
from reactor.engine import compatibility
from reactor.engine.checkpoint import load_context
from reactor.engine.compatibility import Incompatibility
from reactor.engine.env import make_env
from reactor.engine.run_control.resume_version import resume_version
from reactor.errors import ReactorError
from reactor.jobs.announcements import announced
from reactor.jobs.job_context import JobContext
from reactor.model.engine_state import DefinitionStamp
from reactor.model.status import RunStatus
from reactor.model.text import escaping_logger
from reactor.ports.payloads import Payload

__all__ = [
    "HAND_BACK_DELAY", "HELD_ELEMENT_DELAY", "MAX_HAND_BACKS", "RESUME_SCAN_LIMIT", "hand_back",
    "resume_held",
]

log = escaping_logger("reactor.deploys")

#: Hand-backs of one job before its run is held ``needs_version`` anyway.
MAX_HAND_BACKS: Final = 20
#: Seconds a handed-back job waits in the queue before it is delivered again.
HAND_BACK_DELAY: Final = 0.5
#: Seconds before the job of a map element held ``needs_version`` is delivered again.
HELD_ELEMENT_DELAY: Final = 30.0
#: ``needs_version`` runs one :func:`resume_held` call looks at, at most.
RESUME_SCAN_LIMIT: Final = 200


def hand_back(
    jc: JobContext, payload: Payload, reactor: str, stored: DefinitionStamp | None,
    found: Incompatibility,
) -> bool:
    """Hand the job back when a live worker announces the run's definition (see the module
    docstring); nothing stored is changed.

    Args:
        jc: the job being run.
        payload: its payload (re-enqueued with ``hand_backs`` + 1).
        reactor: the run's reactor name.
        stored: the run's stored definition (``None``: stored before fingerprints).
        found: why this worker cannot continue it.

    Returns:
        ``True`` when the job was re-enqueued (the caller ends the job); ``False`` when the
        caller holds the run ``needs_version`` (inline, no announced worker, or the limit).

    Raises:
        StorageError, RouterError: a backend failed (the worker retries the job).
    """
    if jc.inline or stored is None:
        return False
    if payload.hand_backs >= MAX_HAND_BACKS:
        log.warning(
            "event=version_hand_back_limit kind=%s reactor=%s fingerprint=%s hand_backs=%d",
            jc.job.kind, reactor, stored.fingerprint, payload.hand_backs,
        )
        return False
    if not announced(jc.runtime.storage, reactor, stored.fingerprint):
        return False
    log.info(
        "event=version_handed_back kind=%s reactor=%s fingerprint=%s step=%s rule=%s "
        "hand_backs=%d", jc.job.kind, reactor, stored.fingerprint, found.step, found.rule,
        payload.hand_backs + 1,
    )
    jc.requeue(payload.model_copy(update={"hand_backs": payload.hand_backs + 1}),
               HAND_BACK_DELAY)
    return True


def resume_held(runtime: Runtime, *, limit: int = RESUME_SCAN_LIMIT) -> int:
    """Resume the ``needs_version`` runs (top-level and ``async_reactor`` children) this
    process's registered definitions can continue, as ``Reactor.resume_version`` does; a run
    another process resumed first, or still incompatible here, is left alone.

    One call looks at one page of at most ``limit`` held runs; the next call on the same
    storage continues the scan after it (the cursor is kept per storage object, in this
    process) and the one after the last page starts over, so every held run is looked at
    within ``ceil(held / limit)`` calls however many runs this process cannot continue come
    first in the scan.

    Args:
        runtime: the runtime.
        limit: held runs looked at, at most (> 0).

    Returns:
        How many runs were resumed.

    Raises:
        StorageError: the scan failed (a run's own failure is logged and skipped; the
            cursor is kept, so the next call tries that page again).
    """
    storage = runtime.storage
    with _cursors_lock:
        cursor = _cursor_of(storage)
    try:
        resumed, cursor = _resume_page(runtime, limit, cursor)
    except ValueError:  # a cursor this store does not read any more: start over next time
        cursor = None
        raise
    finally:
        with _cursors_lock:
            _keep_cursor(storage, cursor)
    return resumed


#: The scan cursor :func:`resume_held` continues from, by storage object.
_cursors: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
_cursors_lock = threading.Lock()


def _cursor_of(storage: object) -> str | None:
    try:
        return _cursors.get(storage)
    except TypeError:  # not weakly referenceable: always the first page
        return None


def _keep_cursor(storage: object, cursor: str | None) -> None:
    try:
        if cursor is None:
            _cursors.pop(storage, None)
        else:
            _cursors[storage] = cursor
    except TypeError:
        pass


def _resume_page(runtime: Runtime, limit: int, cursor: str | None) -> tuple[int, str | None]:
    """Resume the held runs this process can continue among one scan page of at most
    ``limit`` held runs from ``cursor``; returns how many were resumed and the next page's
    cursor (``None`` after the last page)."""
    env = make_env(runtime)
    page = runtime.storage.contexts.scan(
        statuses=[RunStatus.NEEDS_VERSION.value], limit=limit,
        include_dispatched_children=True, cursor=cursor,
    )
    resumed = 0
    for summary in page:
        if summary.reactor not in registry.names():
            continue
        definition = registry.get(summary.reactor).definition
        try:
            ctx = load_context(env, summary.context_id, open_secrets=False)
            if ctx is None or ctx.status is not RunStatus.NEEDS_VERSION:
                continue
            if compatibility.judge(definition, ctx, forward=ctx.rollback is None) is not None:
                continue
            resume_version(definition, summary.context_id, runtime=runtime)
        except ReactorError as exc:  # resumed elsewhere, locked, unreadable: next time
            log.info("event=resume_held_skipped run_id=%s error=%s", summary.context_id, exc)
            continue
        resumed += 1
        log.info("event=resume_held run_id=%s reactor=%s", summary.context_id, summary.reactor)
    return resumed, page.next_cursor
