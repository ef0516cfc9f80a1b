"""``on_failure``: what a run does when a step fails after its retries (docs/operations.md,
"Pause, rewind, fork").

``"rollback"`` (the default) compensates the failed step and undoes the completed ones at once
(docs/concepts.md, "Rollback"); ``"pause"`` holds the run ``failed_paused`` before any rollback,
for an operator to rewind, fork or cancel it. Declared on a reactor class (``on_failure =
"pause"``: every step) or on one leaf step (``step(..., on_failure="pause")``, which wins over
the class's).
"""

from __future__ import annotations

from typing import Literal

from reactor.errors import DefinitionError

__all__ = ["ON_FAILURE_CHOICES", "OnFailure", "checked_on_failure"]

#: What a run does when a step fails after its retries.
OnFailure = Literal["rollback", "pause"]

#: The values ``on_failure`` accepts.
ON_FAILURE_CHOICES: tuple[OnFailure, ...] = ("rollback", "pause")


def checked_on_failure(value: object, owner: str) -> OnFailure | None:
    """Validate a declared ``on_failure``.

    Args:
        value: ``None`` (not declared), ``"rollback"`` or ``"pause"``.
        owner: the reactor class or step declaring it (for the message).

    Returns:
        The value, or ``None`` when not declared.

    Raises:
        DefinitionError: any other value (the message names ``on_failure``).
    """
    if value is None:
        return None
    if not isinstance(value, str) or value not in ON_FAILURE_CHOICES:
        raise DefinitionError(
            f"{owner}: on_failure must be 'rollback' or 'pause', got {value!r}"
        )
    return value
