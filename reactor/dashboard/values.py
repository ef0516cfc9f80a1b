"""Turning stored values into what the dashboard shows (docs/dashboard.md, "What is shown").

The dashboard reads a run's stored document as JSON text, masks it with
:func:`reactor.model.masking.mask_document` — the one masking function of every view, the
CLI's too (docs/security.md, "What each view shows") — and only then makes it readable with
:func:`display`: codec tags (``{"__t": "decimal", "v": "12.50"}``) are unwrapped to their
payload, a stored ``Failure`` becomes its message and fields (never its traceback), and every
value is bounded (string length, items per container, depth) so a huge result cannot make a
huge page. Nothing here decodes with the codec, so no user type has to be importable to look
at a run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from reactor.model.codec import TAG_KEY
from reactor.model.masking import REDACTED, is_secret

__all__ = [
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_TEXT",
    "display",
    "failure_view",
    "rollback_failure_view",
    "untag",
]

#: Characters of one string shown before it is cut.
MAX_TEXT: Final = 2000
#: Items of one list or mapping shown before the rest is summarised.
MAX_ITEMS: Final = 200
#: Nesting levels shown before a value is summarised.
MAX_DEPTH: Final = 24

_PAYLOAD = "v"


def _text(value: str) -> str:
    if len(value) <= MAX_TEXT:
        return value
    return value[:MAX_TEXT] + f"... [{len(value) - MAX_TEXT} more characters]"


def untag(value: Any) -> tuple[bool, str | None, Any]:
    """Split a codec-tagged object into its tag and payload.

    Args:
        value: any stored JSON value.

    Returns:
        ``(True, tag, payload)`` for ``{"__t": tag, "v": payload, ...}``; else
        ``(False, None, value)``.
    """
    if isinstance(value, Mapping) and isinstance(value.get(TAG_KEY), str):
        return True, str(value[TAG_KEY]), value.get(_PAYLOAD)
    return False, None, value


def rollback_failure_view(value: Any) -> dict[str, Any]:
    """A stored ``RollbackFailure`` (docs/concepts.md, "Rollback") as shown."""
    tagged, _tag, payload = untag(value)
    data = payload if tagged else value
    if not isinstance(data, Mapping):
        return {"message": display(data)}
    return {
        key: display(data.get(key))
        for key in ("step", "kind", "reason", "message", "map_step", "element_index")
    }


def failure_view(value: Any) -> dict[str, Any] | None:
    """A stored ``Failure`` (docs/protocol.md, "Stored failures") as shown: its message,
    class, step, reactor, retryability, validation errors, masked inputs and rollback
    failures — never its traceback (docs/dashboard.md, "Security").

    Args:
        value: the stored failure (tagged ``reactor.Failure``, or already untagged).

    Returns:
        The view, or ``None`` when ``value`` is not a failure.
    """
    tagged, tag, payload = untag(value)
    if tagged and tag != "reactor.Failure":
        return None
    data = payload if tagged else value
    if not isinstance(data, Mapping):
        return None
    failures = data.get("rollback_failures")
    return {
        "error": display(data.get("error")),
        "exception_class": display(data.get("exception_class")),
        "step": display(data.get("step_name")),
        "reactor": display(data.get("reactor_name")),
        "retryable": bool(data.get("retryable", True)),
        "validation_errors": display(data.get("validation_errors") or {}),
        "inputs": display(data.get("inputs")),
        "rollback_failures": [rollback_failure_view(f) for f in failures]
        if isinstance(failures, list) else [],
    }


def _result_view(tag: str, payload: Any, depth: int) -> Any:
    kind = tag.removeprefix("reactor.").lower()
    if kind == "failure":
        return {"status": "failure", **(failure_view(payload) or {})}
    data = payload if isinstance(payload, Mapping) else {}
    shown: dict[str, Any] = {"status": kind, "value": display(data.get("value"), depth + 1)}
    if "reason" in data:
        shown["reason"] = display(data.get("reason"), depth + 1)
    return shown


def display(value: Any, depth: int = 0) -> Any:
    """A stored (already masked) JSON value made readable and bounded.

    Args:
        value: a value of a masked stored document.
        depth: the nesting level of ``value`` (callers leave it at 0).

    Returns:
        JSON-native data: codec tags unwrapped (a decimal or a date as its text, a tuple or a
        set as a list, a model as its fields, a ``Success``/``Failure`` as ``{"status",
        ...}``), secrets as ``"[REDACTED]"``, long strings cut, long containers summarised.
    """
    if is_secret(value):
        return REDACTED
    if depth > MAX_DEPTH:
        return "[nested too deep to show]"
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return _text(value)
    tagged, tag, payload = untag(value)
    if tagged and tag is not None:
        if tag in ("reactor.Success", "reactor.Failure", "reactor.Halt", "reactor.Skipped"):
            return _result_view(tag, payload, depth)
        if tag == "reactor.MapResults" and isinstance(payload, Mapping):
            return display(payload.get("items"), depth + 1)
        if tag == "dict" and isinstance(payload, list):
            pairs = [p for p in payload if isinstance(p, list) and len(p) == 2]
            return {str(display(k, depth + 1)): display(v, depth + 1) for k, v in pairs}
        return display(payload, depth + 1)
    if isinstance(value, Mapping):
        items = list(value.items())
        shown = {str(k): display(v, depth + 1) for k, v in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            shown["..."] = f"[{len(items) - MAX_ITEMS} more entries]"
        return shown
    if isinstance(value, list | tuple):
        listed = [display(v, depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            listed.append(f"[{len(value) - MAX_ITEMS} more items]")
        return listed
    return _text(f"<{type(value).__name__}>")
