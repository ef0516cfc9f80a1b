"""Masking: the one function every view uses to hide secrets (docs/security.md, "What each
view shows").

A value is shown as ``"[REDACTED]"`` when

* its name is in the ``redacted`` list stored with it: a run document's ``redacted`` (reactor
  inputs declared ``redact=True``), or the ``redacted`` list of an ``undo_stack`` entry or of
  the ``rollback`` record (the step arguments fed from secrets); or
* it is a sealed secret, decoded (:class:`~reactor.model.secrets.Sealed`) or in its stored
  JSON form (``{"__t": "reactor.Secret", ...}``), wherever it sits.

:func:`mask_document` works on a run document both as stored (raw JSON) and as decoded by the
codec, so ``reactor runs show``, ``RunView``/``find()``, ``Failure`` and logs share it;
:func:`mask_job_body` does the same for a job envelope or dead-letter body.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from reactor.model.codec import TAG_KEY
from reactor.model.engine_state import QUARANTINE_KEY
from reactor.model.secrets import SECRET_TAG, Sealed

__all__ = [
    "REDACTED",
    "is_secret",
    "mask_document",
    "mask_document_text",
    "mask_job_body",
    "mask_mapping",
    "mask_plain_secrets",
    "mask_text",
    "mask_value",
]

#: The placeholder shown instead of a secret.
REDACTED: Final = "[REDACTED]"


def is_secret(value: Any) -> bool:
    """Whether ``value`` is a sealed secret, decoded or in its stored JSON form
    (docs/security.md, "What is encrypted").

    Args:
        value: any value.

    Returns:
        ``True`` for a :class:`~reactor.model.secrets.Sealed` and for a mapping tagged
        ``"reactor.Secret"``.
    """
    if isinstance(value, Sealed):
        return True
    return isinstance(value, Mapping) and value.get(TAG_KEY) == SECRET_TAG


def mask_value(value: Any) -> Any:
    """``value`` with every sealed secret inside it (dicts, lists, tuples) shown as
    ``"[REDACTED]"`` (docs/security.md, "What each view shows").

    Args:
        value: any value, decoded or raw JSON.

    Returns:
        A masked copy of the containers; other objects are returned as they are.
    """
    if is_secret(value):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: mask_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(mask_value(v) for v in value)
    return value


def mask_mapping(values: Mapping[str, Any], redacted: Iterable[str]) -> dict[str, Any]:
    """``values`` with the names in ``redacted`` shown as ``"[REDACTED]"`` (and sealed values
    anywhere else masked too; docs/security.md, "What each view shows").

    Args:
        values: inputs or step arguments by name.
        redacted: the secret names (names absent from ``values`` are ignored).

    Returns:
        A new dict, in ``values``' order.
    """
    secret = set(redacted)
    return {k: (REDACTED if k in secret else mask_value(v)) for k, v in values.items()}


def mask_text(text: str, secrets: Iterable[Any]) -> str:
    """``text`` (an error message) with the text of every secret value in it shown as
    ``"[REDACTED]"`` (docs/security.md, "What each view shows"): what a message may echo of an
    input or argument declared ``redact=True`` never reaches a log or a trace.

    Args:
        text: the text to show.
        secrets: the secret values (``None``, empty texts and sealed values, whose plain text
            user code never saw, are skipped); longer texts are replaced first.

    Returns:
        The masked text (``text`` itself when no secret occurs in it).
    """
    forms = sorted(
        {str(v) for v in secrets if v is not None and not is_secret(v)} - {""},
        key=len, reverse=True,
    )
    for form in forms:
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def mask_plain_secrets(value: Any, secrets: Iterable[Any]) -> Any:
    """``value`` (a step's heartbeat details) with every secret value in it shown as
    ``"[REDACTED]"``, before it is stored (docs/concepts.md, "Heartbeats"; docs/security.md,
    "What each view shows"): a text holding a secret's text has it replaced
    (:func:`mask_text`), any other value of a secret's type equal to it is replaced whole;
    dicts, lists and tuples are walked; sealed values are masked as by :func:`mask_value`.

    Args:
        value: any value.
        secrets: the plain secret values (the run's ``redact=True`` inputs and the step's
            secret arguments); ``None`` and empty texts are skipped.

    Returns:
        ``value`` itself when no secret occurs in it, else a masked copy.
    """
    plain = [v for v in secrets if v is not None and v != "" and not is_secret(v)]
    if not plain:
        return value
    return _mask_plain(value, plain)


def _mask_plain(value: Any, secrets: list[Any]) -> Any:
    if isinstance(value, str):
        return mask_text(value, secrets)
    if is_secret(value):
        return REDACTED
    if isinstance(value, Mapping):
        masked = {k: _mask_plain(v, secrets) for k, v in value.items()}
        same = all(masked[k] is v for k, v in value.items())
        return value if same else masked
    if isinstance(value, list | tuple):
        items = [_mask_plain(v, secrets) for v in value]
        same = all(a is b for a, b in zip(items, value, strict=True))
        return value if same else (items if isinstance(value, list) else tuple(items))
    try:
        hit = any(value == s and type(value) is type(s) for s in secrets)
    except Exception:  # an odd __eq__: compared as not equal
        hit = False
    return REDACTED if hit else value


def _names(value: Any, fallback: Iterable[str]) -> list[str]:
    if isinstance(value, list):
        return [str(x) for x in value]
    return list(fallback)


def _mask_arguments(entry: Any, fallback: Iterable[str]) -> Any:
    """An undo-stack entry or rollback record with its ``arguments`` masked by its own
    ``redacted`` list (documents written before entries had one: the run's input names)."""
    if not isinstance(entry, Mapping):
        return mask_value(entry)
    masked = {k: mask_value(v) for k, v in entry.items() if k != "arguments"}
    arguments = entry.get("arguments")
    if isinstance(arguments, Mapping):
        masked["arguments"] = mask_mapping(arguments, _names(entry.get("redacted"), fallback))
    elif "arguments" in entry:
        masked["arguments"] = mask_value(arguments)
    return {k: masked[k] for k in entry}


def _mask_composed(value: Any) -> Any:
    if (
        isinstance(value, Mapping)
        and value.get("type") == "compose"
        and isinstance(value.get("context"), Mapping)
    ):
        return {**value, "context": mask_document(value["context"])}
    return mask_value(value)


def mask_document(
    document: Mapping[str, Any], redacted: Iterable[str] | None = None
) -> dict[str, Any]:
    """A run document with every secret shown as ``"[REDACTED]"`` — the one masking function
    of every view (docs/security.md, "What each view shows").

    Masks: ``inputs`` by the document's ``redacted`` list; each ``undo_stack`` entry's and the
    ``rollback`` record's ``arguments`` by their own ``redacted`` list; embedded composed
    children (recursively, each by its own list); the original text kept by a quarantine
    (``private_data.quarantine.original_document``); and every sealed value anywhere.

    Args:
        document: a context document (:meth:`reactor.model.context.Context.to_document`),
            raw (``json.loads`` of the stored text) or decoded by the codec.
        redacted: the secret input names; ``None`` reads the document's ``redacted`` field.

    Returns:
        A masked copy (the argument is not changed), keys in the same order.
    """
    names = _names(document.get("redacted"), ()) if redacted is None else list(redacted)
    masked: dict[str, Any] = {}
    for key, value in document.items():
        if key == "inputs" and isinstance(value, Mapping):
            masked[key] = mask_mapping(value, names)
        elif key == "undo_stack" and isinstance(value, list):
            masked[key] = [_mask_arguments(entry, names) for entry in value]
        elif key == "rollback" and isinstance(value, Mapping):
            masked[key] = _mask_arguments(value, names)
        elif key == "composed_contexts" and isinstance(value, Mapping):
            masked[key] = {k: _mask_composed(v) for k, v in value.items()}
        elif key == "private_data" and isinstance(value, Mapping):
            masked[key] = _mask_private(value)
        else:
            masked[key] = mask_value(value)
    return masked


def _mask_private(private: Mapping[str, Any]) -> dict[str, Any]:
    """A stored engine state (``private_data``, :mod:`reactor.model.engine_state`) with sealed
    values masked and the quarantine's original text masked as a document of its own."""
    masked = {k: mask_value(v) for k, v in private.items()}
    info = private.get(QUARANTINE_KEY)
    if isinstance(info, Mapping) and isinstance(info.get("original_document"), str):
        masked[QUARANTINE_KEY] = {
            **mask_value(info), "original_document": mask_document_text(info["original_document"])
        }
    return masked


def mask_document_text(text: str) -> str:
    """:func:`mask_document` applied to a stored document's JSON text (docs/security.md,
    "What each view shows").

    Args:
        text: the stored text.

    Returns:
        The masked document as compact JSON text; a text that is not a JSON object (e.g. a
        corrupt document) is returned unchanged.
    """
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if not isinstance(parsed, dict):
        return text
    return json.dumps(mask_document(parsed), separators=(",", ":"), ensure_ascii=False)


def _mask_keys(value: Any, names: frozenset[str]) -> Any:
    if is_secret(value):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: (REDACTED if k in names else _mask_keys(v, names)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_keys(v, names) for v in value]
    return value


def mask_job_body(body: str, redacted: Iterable[str] = ()) -> str:
    """A job envelope or dead-letter body (its text) with its secrets shown as
    ``"[REDACTED]"`` (docs/security.md, "What each view shows").

    Job payloads carry identities only, so normally nothing changes; a body holding a sealed
    value, or a key named in ``redacted`` at any depth, is masked.

    Args:
        body: the body text (``DeadLetter.body`` when its ``body_encoding`` is ``"text"``).
        redacted: extra key names to mask wherever they appear.

    Returns:
        The masked body as compact JSON text when the body is JSON; any other text (a poison
        message) is returned unchanged.
    """
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return body
    masked = _mask_keys(parsed, frozenset(redacted))
    if masked == parsed:
        return body
    return json.dumps(masked, separators=(",", ":"), ensure_ascii=False)
