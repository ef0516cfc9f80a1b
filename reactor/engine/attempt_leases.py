"""A time-limited step's leases in a worker (docs/concepts.md, "Time limits", "Heartbeats").

While an attempt of a step with a time limit runs in a worker — ``Timeouts(per_attempt=t)``,
what is left of ``total``, or ``heartbeat=h`` — the two leases another worker waits on end
with the shortest of those limits instead of their own lengths: the run's liveness lock
(``context_lock_ttl``) and the job's delivery visibility (``visibility_timeout``). A worker
that dies mid-step then leaves both to lapse within about that limit, when its attempt would
have timed out anyway: its job comes back to another worker (or the sweeper re-dispatches
the run), which takes the lock and runs the next attempt (from ``ctx.last_heartbeat`` for a
heartbeating step). A live worker renews
both every third of the shorter lease from the shared heartbeat scheduler, whatever its
step body does; the body's own silence is what the heartbeat limit judges.

Not every router honours a delivery lease shorter than its visibility timeout (the Redis
router keeps a delivery at least that long), and the run sweeper takes a run written within
one visibility timeout as still queued. So the sweeper also asks
:func:`abandoned_heartbeat_step`: a ``running`` run whose lock is free and whose last save kept
a step's heartbeat was being executed by a worker that is gone (heartbeats are stored only by
the lock holder, and a live one keeps its lock), and is re-dispatched at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from reactor.engine.liveness import FencedCheckpointer
from reactor.engine.state import RunState
from reactor.errors import DeserializationError
from reactor.model import checkpoints
from reactor.model.context import Context
from reactor.model.coordination.renewal import MIN_LEASE, holder_lease
from reactor.model.records import ContextRecord

__all__ = ["abandoned_heartbeat_step", "attempt_lease", "leases_at_most"]


def attempt_lease(limit: float, skew: float) -> float:
    """The lease length a time-limited attempt holds its run with, in seconds.

    Args:
        limit: the attempt's shortest limit (its time left, or its heartbeat limit), seconds.
        skew: the storage's clock-skew budget, in seconds.

    Returns:
        ``limit``, raised to :data:`~reactor.model.coordination.renewal.MIN_LEASE` and to
        ``2 x skew + MIN_LEASE`` when the holder's share of it would not exceed the skew.
    """
    lease = max(float(limit), MIN_LEASE)
    if holder_lease(lease, skew) < MIN_LEASE / 2:
        lease = max(lease, 2.0 * skew + MIN_LEASE)
    return lease


@contextmanager
def leases_at_most(state: RunState, limit: float) -> Iterator[None]:
    """Hold ``state``'s run lock and its job's delivery with leases of at most
    :func:`attempt_lease` seconds in the scope; both get their own lengths back after it.

    Outside a worker (no fenced hold, no delivery) nothing changes. Never raises.

    Args:
        state: the executing run.
        limit: the attempt's shortest limit, in seconds.
    """
    env = state.env
    seconds = attempt_lease(limit, env.storage.capabilities.clock_skew)
    with ExitStack() as stack:
        checkpoint = state.checkpoint
        if isinstance(checkpoint, FencedCheckpointer):
            stack.enter_context(checkpoint.liveness.lease_at_most(seconds))
        if env.unit_lease is not None:
            stack.enter_context(env.unit_lease(seconds))
        yield


def abandoned_heartbeat_step(record: ContextRecord) -> str | None:
    """The step whose heartbeat stored run ``record`` keeps for its step in flight
    (``current_step``), else ``None``. Called by the run sweeper for a ``running`` run whose
    liveness lock is free: such a run lost its worker mid-step (docs/workers.md, "Sweep
    cursors and dispatch leases").

    Args:
        record: the stored run (its secrets stay sealed: no key is needed).

    Returns:
        The step name, or ``None`` (no kept heartbeat, or a document that cannot be decoded:
        the run handler quarantines it).
    """
    try:
        ctx = Context.from_document(checkpoints.stored_document(record))
    except DeserializationError:
        return None
    step = ctx.current_step
    if step is None or ctx.kept_heartbeat(step) is None:
        return None
    return step
