"""The arguments operators pass to run control (docs/run-control.md, "Cancel";
docs/operations.md, "Suspend and unsuspend"): a run id and free texts (a reason, who asked),
checked before anything is read, each refusal naming its argument.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["MAX_TEXT_LENGTH", "check_run_id", "check_text"]

#: The longest operator text (a ``reason``, a ``by``), in characters.
MAX_TEXT_LENGTH = 1000

#: Builds the typed error of a refused argument: ``(message, field=name)``.
Refusal = Callable[..., Exception]


def check_run_id(call: str, run_id: object, refuse: Refusal) -> None:
    """Refuse a ``run_id`` that is not a non-blank string.

    Args:
        call: the operation, for the message (``"cancel"``).
        run_id: the value given.
        refuse: the operation's error type (called with the message and ``field=``).

    Raises:
        Exception: what ``refuse`` builds, with ``field == "run_id"``.
    """
    if not isinstance(run_id, str) or not run_id.strip():
        raise refuse(
            f"{call}(run_id=...) must be a non-blank string, got {type(run_id).__name__}",
            field="run_id",
        )


def check_text(call: str, name: str, value: object, refuse: Refusal) -> None:
    """Refuse a text argument that is not ``None`` or a storable string of at most
    :data:`MAX_TEXT_LENGTH` characters.

    Args:
        call: the operation, for the message.
        name: the argument's name.
        value: the value given.
        refuse: the operation's error type (called with the message and ``field=``).

    Raises:
        Exception: what ``refuse`` builds, with ``field == name``.
    """
    if value is None:
        return
    if not isinstance(value, str):
        raise refuse(
            f"{call}({name}=...) must be a string or None, got {type(value).__name__}",
            field=name,
        )
    if len(value) > MAX_TEXT_LENGTH:
        raise refuse(
            f"{call}({name}=...) is {len(value)} characters, over {MAX_TEXT_LENGTH}",
            field=name,
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: storable nowhere
        raise refuse(
            f"{call}({name}=...) is not valid text: character {exc.start} is a lone "
            "surrogate, which cannot be stored", field=name,
        ) from None
