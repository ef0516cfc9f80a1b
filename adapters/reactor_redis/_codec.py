"""JSON shapes of Step Result Records and the opaque page cursor (kept out of the core).

The adapter depends on ``reactor.ports`` and ``reactor.model`` only (ARCHITECTURE §1), so the
few encoders it shares in spirit with :mod:`reactor.generic` live here.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any, cast

from reactor.ports.records import StepResultRecord, StepResultStatus

__all__ = ["decode_cursor", "decode_step_result", "encode_cursor", "encode_step_result"]

_PAGE_KEY = re.compile(r"\A\d{17}:.+\Z", re.DOTALL)


def encode_step_result(record: StepResultRecord) -> dict[str, Any]:
    """The JSON-native dict stored for a Step Result Record."""
    return {
        "context_id": record.context_id,
        "step_name": record.step_name,
        "status": record.status,
        "root_context_id": record.root_context_id,
        "reactor": record.reactor,
        "dispatched_at": record.dispatched_at,
        "updated_at": record.updated_at,
        "parked_until": record.parked_until,
        "waiting": record.waiting,
        "contention_attempts": record.contention_attempts,
        "outcome": record.outcome,
        "data": dict(record.data),
    }


def decode_step_result(value: Mapping[str, Any]) -> StepResultRecord:
    """Parse what :func:`encode_step_result` produced."""
    parked = value.get("parked_until")
    return StepResultRecord(
        context_id=str(value["context_id"]),
        step_name=str(value["step_name"]),
        status=cast(StepResultStatus, value["status"]),
        root_context_id=str(value["root_context_id"]),
        reactor=str(value["reactor"]),
        dispatched_at=float(value["dispatched_at"]),
        updated_at=float(value["updated_at"]),
        parked_until=None if parked is None else float(parked),
        waiting=value.get("waiting"),
        contention_attempts=int(value.get("contention_attempts", 0)),
        outcome=value.get("outcome"),
        data=dict(value.get("data") or {}),
    )


def encode_cursor(key: str) -> str:
    """A page key as an opaque cursor (unpadded base64url of its UTF-8 bytes)."""
    return base64.urlsafe_b64encode(key.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> str:
    """Decode a cursor made by :func:`encode_cursor`.

    Raises:
        ValueError: the cursor is not base64url or does not hold a page key.
    """
    try:
        raw = cursor.encode("ascii")
        key = base64.urlsafe_b64decode(raw + b"=" * (-len(raw) % 4)).decode("utf-8")
    except (UnicodeError, binascii.Error, ValueError) as exc:
        raise ValueError(f"malformed run page cursor {cursor!r}") from exc
    if not _PAGE_KEY.match(key) or encode_cursor(key) != cursor:
        raise ValueError(f"malformed run page cursor {cursor!r}")
    return key
