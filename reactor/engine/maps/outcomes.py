"""The stored outcome of one position of a fan-out map's rollback (docs/fan_out.md,
"Rollback"; storage: docs/protocol.md#map-rollbacks).

Each position of a map rollback settles as one :class:`~reactor.model.records.RollbackOutcome`
whose ``failures`` are codec JSON text: the element's own rollback failures, or one entry that
stands for the whole element when it could not be undone (its context expired, or it was still
running when the rollback gave up waiting for it). The owner's aggregate decodes them.
"""

from __future__ import annotations

from reactor.errors import DeserializationError
from reactor.model import codec
from reactor.model.records import RollbackOutcome
from reactor.model.results import RollbackFailure

__all__ = ["decode_failures", "element_failure", "encode_failures", "in_flight", "unavailable"]


def encode_failures(failures: list[RollbackFailure]) -> str:
    """The codec JSON text of an outcome's failures."""
    return codec.dumps(list(failures))


def decode_failures(text: str) -> list[RollbackFailure]:
    """Read an outcome's failures (malformed text yields one ``context_unavailable`` entry)."""
    try:
        value = codec.loads(text)
    except DeserializationError:
        value = None
    if isinstance(value, list) and all(isinstance(f, RollbackFailure) for f in value):
        return list(value)
    return [RollbackFailure(step="?", kind="undo", reason="context_unavailable",
                            message="unreadable rollback outcome")]


def element_failure(step: str, index: int | None, reason: str, message: str) -> RollbackFailure:
    """A rollback failure that stands for element ``index`` of map step ``step`` as a whole
    (``index`` ``None``: an element whose index is unknown), with ``reason`` and a message
    naming the element."""
    return RollbackFailure(
        step=step, kind="undo", reason=reason,
        message=f"map element {index if index is not None else '?'} {message}",
        map_step=step, element_index=index,
    )


def unavailable(step: str, index: int | None = None) -> RollbackOutcome:
    """The outcome of a position whose element context is gone (its index went with it)."""
    failure = element_failure(step, index, "context_unavailable", "context expired")
    return RollbackOutcome(index=index, outcome="context_unavailable",
                           failures=encode_failures([failure]))


def in_flight(step: str, index: int) -> RollbackOutcome:
    """The outcome of an element whose lock stayed held past the snooze cap."""
    failure = element_failure(
        step, index, "element_in_flight", "was still running at rollback time"
    )
    return RollbackOutcome(index=index, outcome="element_in_flight",
                           failures=encode_failures([failure]))
