"""``InterruptClaim``: how an interrupt was decided, as kept in the claims store
(docs/run-control.md, "Interrupts"; docs/protocol.md, "Claims").

Every decision on a paused interrupt goes through one first-writer-wins claim,
``ClaimStore.claim_interrupt_resume(root run id, step path, text)``: a resume with its payload,
an expiry (the timeout passed) or an exhaustion (the last allowed invalid payload). Exactly one
claim ever exists per run and step path, so a resume racing another resume, an expiry or an
exhaustion has exactly one winner. The claim is the truth the engine acts on: when a run
continues past the interrupt (in the caller, a worker, or after a crash), the executor reads
the claim and the interrupt step succeeds with the payload or fails with the recorded error.

The claim's text is this object encoded by :mod:`reactor.model.codec`
(``{"action", "payload", "claimed_at", "message", "field_errors"}``); the store keeps it
verbatim and never parses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from reactor.errors import DeserializationError
from reactor.model import codec

__all__ = ["MAX_CORRELATION_ID_LENGTH", "ClaimAction", "InterruptClaim"]

#: The longest interrupt correlation id, in characters (docs/run-control.md, "Interrupts").
MAX_CORRELATION_ID_LENGTH = 255

#: What decided an interrupt: a resume, its timeout, or its last invalid payload.
ClaimAction = Literal["resume", "expire", "exhaust"]

_ACTIONS: frozenset[str] = frozenset({"resume", "expire", "exhaust"})


@dataclass(frozen=True)
class InterruptClaim:
    """The decision on one interrupt (see the module docstring).

    Attributes:
        action: ``"resume"``, ``"expire"`` or ``"exhaust"``.
        claimed_at: epoch seconds on the runtime clock when it was claimed (a claim older
            than ``context_lock_ttl`` on a run that is still paused belongs to a claimer that
            stopped, and is applied by the next caller: docs/run-control.md, "Interrupts").
        payload: ``"resume"`` only: the validated payload, the interrupt step's result.
        message: ``"expire"``/``"exhaust"``: the failure message the run fails with.
        field_errors: ``"exhaust"``: the last payload's ``{"field": ["message", ...]}``.
        deadline: ``"expire"``: the deadline that passed (epoch seconds, runtime clock).
    """

    action: ClaimAction
    claimed_at: float
    payload: Any = None
    message: str = ""
    field_errors: Mapping[str, Sequence[str]] = field(default_factory=dict)
    deadline: float | None = None

    def encode(self) -> str:
        """The claim's text for ``ClaimStore.claim_interrupt_resume``.

        Raises:
            EncodeError: the payload holds a value the codec cannot encode.
        """
        return codec.dumps({
            "action": self.action,
            "claimed_at": self.claimed_at,
            "payload": self.payload,
            "message": self.message,
            "field_errors": {k: list(v) for k, v in self.field_errors.items()},
            "deadline": self.deadline,
        })

    @classmethod
    def decode(cls, text: str) -> InterruptClaim:
        """Read a claim's text back.

        Args:
            text: what :meth:`encode` wrote.

        Returns:
            The claim.

        Raises:
            DeserializationError: the text is not a claim this version wrote (the message
                names the field).
        """
        data = codec.loads(text)
        if not isinstance(data, dict):
            raise DeserializationError("interrupt claim must be an object")
        action = data.get("action")
        if action not in _ACTIONS:
            raise DeserializationError(f"interrupt claim field 'action' is {action!r}")
        claimed_at = data.get("claimed_at")
        if not isinstance(claimed_at, int | float) or isinstance(claimed_at, bool):
            raise DeserializationError("interrupt claim field 'claimed_at' must be a number")
        errors = data.get("field_errors") or {}
        if not isinstance(errors, dict) or not all(
            isinstance(v, list) for v in errors.values()
        ):
            raise DeserializationError("interrupt claim field 'field_errors' is malformed")
        deadline = data.get("deadline")
        if deadline is not None and (
            not isinstance(deadline, int | float) or isinstance(deadline, bool)
        ):
            raise DeserializationError("interrupt claim field 'deadline' must be a number")
        return cls(
            action=action,
            claimed_at=float(claimed_at),
            payload=data.get("payload"),
            message=str(data.get("message") or ""),
            field_errors={str(k): [str(m) for m in v] for k, v in errors.items()},
            deadline=None if deadline is None else float(deadline),
        )
