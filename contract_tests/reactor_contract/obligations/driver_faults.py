"""Obligations under faults injected at the driver (docs/obligations.md; docs/contract-suite.md,
"The obligation catalogue" and "Faults injected at the driver")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_RULE = 'docs/contract-suite.md, "Rules: driver errors"'
_FAULTS = 'docs/contract-suite.md, "Faults injected at the driver"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-driver_faults-1",
        "A permanent driver error (permission denied, a validation error) in any request of a "
        "storage operation surfaces as StorageError chained to the driver's exception "
        "(__cause__); the operation never answers None, False, 'not found', 'lost the race' "
        "or nothing instead.",
        _RULE,
    ),
    Obligation(
        "O-driver_faults-2",
        "A permanent driver error in any request of a router operation (enqueue, receive, "
        "ack, retry, extend, dead_letter) surfaces as RouterError chained to the driver's "
        "exception; never an empty receive or a silent ack.",
        _RULE,
    ),
    Obligation(
        "O-driver_faults-3",
        "A transient driver error (a connection reset before the request was sent, "
        "throttling, or a timeout after the server applied the request) in any request of a "
        "storage operation either surfaces as StorageError chained to the driver's exception "
        "or the operation completes; no other exception escapes.",
        _RULE,
    ),
    Obligation(
        "O-driver_faults-4",
        "After a transient driver error in any request of a storage operation (context save, "
        "load, append and delete, lock acquire and release, semaphore acquire, step result "
        "put and get, an idempotency claim), a retry of the same operation leaves the right "
        "state: nothing lost and nothing duplicated (an append retried after its write was "
        "applied does not append the segment twice nor break the record; a retried claim "
        "answers the caller's own id; a retried acquire holds the lock with one token and "
        "one semaphore slot).",
        _FAULTS,
    ),
    Obligation(
        "O-driver_faults-5",
        "A transient driver error in any request of a router operation either surfaces as "
        "RouterError chained to the driver's exception or the operation completes; after a "
        "retry nothing is lost and nothing duplicated: an enqueued job is delivered (at least "
        "once, each copy the same job), a job whose receive failed is delivered again after "
        "the visibility timeout, an acknowledged job is never delivered again, a retried job "
        "is delivered again with a higher delivery count, and a dead-lettered job is one dead "
        "letter and never delivered again.",
        _FAULTS,
    ),
    Obligation(
        "O-driver_faults-6",
        "An orderly shutdown (close) of a consumer loses none of its received but "
        "unacknowledged jobs, also when the driver fails during the close: another consumer "
        "receives each of them after the visibility timeout.",
        _FAULTS,
    ),
)
