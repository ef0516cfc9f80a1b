"""What a stored run without a liveness lock is waiting for, if anything.

A run parked on a fan-out map or on an ``async_step`` holds no liveness lock while the unit it
waits for runs elsewhere, so to the run sweeper it looks like a lost run. Re-dispatching it
while that unit is still in flight only adds a job that loads the run, finds the unit
unfinished and hands off again: on a slow backend such copies compete with the real work
(docs/workers.md, "Sweep cursors and dispatch leases", "Waiting runs are not lost"). The
unit's own machinery resumes the run when it finishes: the map's collector, or the async
step's handler, enqueues the owner.

:func:`waiting_on` names the in-flight unit, judged from durable state only: a fan-out map
whose results are not all stored, an ``async_step`` whose record is not ``completed``.
"""

from __future__ import annotations

from reactor.errors import DeserializationError
from reactor.model import checkpoints
from reactor.model.context import Context
from reactor.model.records import ContextRecord
from reactor.model.run_records import MapRef
from reactor.ports.storage import Storage

__all__ = ["waiting_on"]


def _map_in_flight(storage: Storage, ref: MapRef) -> bool:
    map_id = ref.map_id
    count = ref.count or 0
    if storage.maps.metadata(map_id) is None:
        return False
    return storage.maps.count_results(map_id) < count


def waiting_on(storage: Storage, record: ContextRecord) -> str | None:
    """The unit a stored run waits for while that unit is still in flight, else ``None``.

    Only durable facts count: a fan-out map of the run (a ``composed_contexts`` entry naming
    a map) whose metadata exists and whose stored results are fewer than its elements, or the
    ``async_step`` the run is parked on (its ``waiting`` note) whose step result record is not
    ``completed``. A run whose document cannot be decoded waits for nothing (the run handler
    quarantines it). Secrets stay sealed: no key is needed.

    Args:
        storage: where the map and step result records live.
        record: the stored run.

    Returns:
        ``"map:<map id>"`` or ``"async_step:<step>"``, or ``None`` when the run waits for no
        unit in flight (docs/workers.md, "Sweep cursors and dispatch leases").

    Raises:
        StorageError: reading a map or a step result failed.
    """
    try:
        ctx = Context.from_document(checkpoints.stored_document(record))
    except DeserializationError:
        return None
    for ref in ctx.composed_contexts.values():
        if isinstance(ref, MapRef) and ref.is_fan_out and _map_in_flight(storage, ref):
            return f"map:{ref.map_id}"
    waiting = ctx.engine_state.waiting
    if waiting is not None and waiting.primitive == "async_step":
        step = waiting.key
        unit = storage.step_results.get(record.context_id, step)
        if unit is not None and unit.status != "completed":
            return f"async_step:{step}"
    return None
