"""The ``map_collect`` job: resume a fan-out map's owner once every element settled
(docs/architecture.md, "Job kinds"; docs/protocol.md#maps).

Serialised by the ``map_collect:<map>`` lock (waiting ``JobContext.liveness_wait``; skipped on
the inline router). The **slots** are the authority, not the counter: only when every index has
a slot does the collector claim the owner signal (first writer wins) and enqueue the owner's
``run`` job, which adopts the outcome. It writes nothing else (single writer: docs/architecture.md,
"Execution invariants").
"""

from __future__ import annotations

from reactor.coordination.lock import Lock
from reactor.engine.dispatch_leases import mark_enqueued, run_unit
from reactor.engine.env import make_env
from reactor.engine.liveness import liveness_lock
from reactor.errors import LockAcquisitionError
from reactor.jobs.job_context import JobContext
from reactor.model.keys import map_collect_key
from reactor.model.text import escaping_logger
from reactor.ports.payloads import MapCollectPayload, RunPayload, job

__all__ = ["handle_map_collect"]

log = escaping_logger("reactor.map")


def handle_map_collect(jc: JobContext, payload: MapCollectPayload) -> None:
    """Run one ``map_collect`` job (see the module docstring).

    Raises:
        StorageError, RouterError: a backend failed (the worker retries the job).
    """
    env = make_env(jc.runtime)
    maps = env.storage.maps
    meta = maps.metadata(payload.map_id)
    if meta is None:
        log.warning("event=map_missing map_id=%s (collector)", payload.map_id)
        return
    lock: Lock | None = None
    if not jc.inline:
        lock = liveness_lock(env, map_collect_key(meta.map_id), wait=jc.liveness_wait)
        try:
            lock.acquire()
        except LockAcquisitionError:
            log.info("event=map_collect_busy map_id=%s", meta.map_id)
            return
    try:
        present = maps.count_results(meta.map_id)
        if present < meta.count:
            log.info("event=map_collect_pending map_id=%s present=%d count=%d",
                     meta.map_id, present, meta.count)
            return
        if not maps.claim_owner_signal(meta.map_id):
            return
        # the owner looks lost to the run sweeper until this job runs: mark it queued
        mark_enqueued(jc.runtime, run_unit(meta.owner_context_id))
        jc.runtime.router.enqueue(
            job(RunPayload(context_id=meta.owner_context_id, reactor=meta.owner_reactor))
        )
        log.info("event=map_collected map_id=%s owner=%s", meta.map_id, meta.owner_context_id)
    finally:
        if lock is not None:
            try:
                lock.release()
            except Exception:  # it lapses with its TTL anyway
                pass
