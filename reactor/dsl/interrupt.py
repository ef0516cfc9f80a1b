"""``InterruptDecl``: what an ``interrupt`` step waits for and how long (docs/run-control.md,
"Interrupts").

An interrupt is a step with no body: reaching it pauses the run (stored ``paused``) until
``Reactor.resume`` brings a payload, which becomes the step's result. It is declared with
:func:`reactor.dsl.declarations.interrupt` (next to ``step``, ``compose`` and ``map_step``)::

    class Refund(Reactor):
        order_id = Input(str)

        reserve = step(Reserve, order_id=input("order_id"))
        approval = interrupt(
            wait_for="reserve",                              # reached after these steps
            correlation_id=input("order_id", transform=lambda v: f"refund:{v}"),
            schema=Approval,                                 # a pydantic model, checked on resume
            max_attempts=3, timeout=3600, expiry="active",
        )
        pay = step(Pay, approver=result("approval", "approver"))

This module holds the declaration's options and the payload check a resume runs
(:meth:`InterruptDecl.check_payload`); pausing and resuming live in
:mod:`reactor.engine.run_control.interrupts` and :mod:`reactor.engine.run_control.resume`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from reactor.dsl.inputs import codec_types, register_codec_types
from reactor.errors import DefinitionError, EncodeError
from reactor.model import codec

__all__ = ["DEFAULT_MAX_ATTEMPTS", "InterruptDecl"]

#: Invalid payloads an interrupt accepts when ``max_attempts`` is not given.
DEFAULT_MAX_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class InterruptDecl:
    """The options of one ``interrupt`` step.

    Attributes:
        schema: a pydantic model class the resume payload must validate against (the step's
            result is then the model instance), or ``None`` to accept any value the codec can
            store (JSON values, codec built-ins, registered types).
        max_attempts: invalid payloads accepted before the run fails and is rolled back
            (>= 1; the payload that reaches it fails the run).
        timeout: seconds the run may stay paused at the interrupt, or ``None`` (no timeout;
            the run then waits until it is resumed, or until storage retention drops it:
            ``context_ttl``).
        expiry: how the timeout is enforced: ``"lazy"`` (a resume after the deadline fails
            the run) or ``"active"`` (also a delayed job fails it at the deadline); ``None``
            without a timeout.

    Raises:
        DefinitionError: ``schema`` is not a pydantic model class, ``max_attempts`` is not a
            positive integer, ``timeout`` is not a positive finite number of seconds, or
            ``expiry`` is not ``"lazy"``/``"active"`` (or is given without a timeout).
    """

    schema: type[BaseModel] | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    timeout: float | None = None
    expiry: Literal["lazy", "active"] | None = None

    def __post_init__(self) -> None:
        schema = self.schema
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise DefinitionError(
                f"interrupt(schema=...) must be a pydantic model class, got {schema!r}"
            )
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise DefinitionError(
                f"interrupt(max_attempts=...) must be a positive integer, got {attempts!r}"
            )
        timeout = self.timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float)
            or not math.isfinite(timeout) or timeout <= 0
        ):
            raise DefinitionError(
                "interrupt(timeout=...) must be a positive, finite number of seconds, got "
                f"{timeout!r}"
            )
        expiry = self.expiry
        if expiry is not None and expiry not in ("lazy", "active"):
            raise DefinitionError(
                f"interrupt(expiry=...) must be 'lazy' or 'active', got {expiry!r}"
            )
        if expiry is not None and timeout is None:
            raise DefinitionError(
                f"interrupt(expiry={expiry!r}) needs a timeout (seconds) to expire after"
            )
        if timeout is not None and expiry is None:
            object.__setattr__(self, "expiry", "lazy")
        if timeout is not None:
            object.__setattr__(self, "timeout", float(timeout))

    def codec_types(self) -> Iterator[type[Any]]:
        """Yield the payload schema's codec types (:func:`reactor.dsl.inputs.codec_types`):
        the resumed payload is stored as the step's result."""
        if self.schema is not None:
            yield from codec_types(self.schema)

    def register_codec_types(self) -> None:
        """Register the payload schema with the codec (the resumed payload is stored as the
        step's result); a registration of the user's own wins (docs/concepts.md,
        "Decisions")."""
        if self.schema is not None:
            register_codec_types(self.schema)

    def check_payload(
        self, payload: Any, max_bytes: int | None = None
    ) -> tuple[Any, dict[str, list[str]]]:
        """Validate a resume payload.

        With a ``schema``, the payload (a mapping, or an instance of the schema) is validated
        by pydantic and the value is the model instance; without one, any value the codec can
        encode is accepted as it is. Messages name fields, never values.

        Args:
            payload: what the resume brought.
            max_bytes: the most UTF-8 bytes its encoded value may take (the run's
                ``max_context_bytes``): a larger payload could never be stored with the run,
                so it is refused like an invalid one; ``None``: no limit.

        Returns:
            ``(value, {})`` for a valid payload; ``(None, field_errors)`` otherwise, where
            ``field_errors`` is ``{"field.path": ["message", ...]}`` (``"payload"`` for the
            payload as a whole).
        """
        value = payload
        if self.schema is not None and not isinstance(payload, self.schema):
            try:
                value = self.schema.model_validate(payload)
            except ValidationError as exc:
                errors: dict[str, list[str]] = {}
                for err in exc.errors(include_url=False, include_input=False):
                    loc = ".".join(str(p) for p in err["loc"]) or "payload"
                    errors.setdefault(loc, []).append(str(err["msg"]))
                return None, errors
        try:
            size = len(codec.dumps(value).encode("utf-8"))
        except EncodeError as exc:
            return None, {"payload": [f"cannot be stored: {exc}"]}
        if max_bytes is not None and size > max_bytes:
            return None, {"payload": [
                f"takes {size} bytes encoded, more than max_context_bytes ({max_bytes})"
            ]}
        return value, {}
