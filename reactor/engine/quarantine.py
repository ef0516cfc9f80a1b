"""Quarantine: store an unreadable run context as ``failed``, keeping its text and the reason.

A stored document that no longer decodes (:class:`~reactor.errors.DeserializationError`,
:class:`~reactor.errors.SchemaVersionError`) cannot be continued. Left as it is, a
``running`` record would be re-dispatched by every sweep and dead-lettered again by every worker (a
crash loop). The rule (a run that cannot continue is stored as failed with the reason, never
dropped: docs/architecture.md, "Execution invariants") is applied here: the record is replaced by a
readable *quarantine document* — status ``failed``, a non-retryable ``Failure`` carrying the reason,
and the original text kept verbatim in its engine state
(:class:`~reactor.model.engine_state.Quarantine`; stored shape: docs/protocol.md, "Contexts")
for an operator — so
``find()`` shows the failure and no sweeper picks the record again.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace

from reactor import registry
from reactor.engine import secret_policy
from reactor.engine.checkpoint import new_base_id
from reactor.engine.env import Env
from reactor.errors import (
    ContextTooLargeError,
    DeserializationError,
    UnknownReactorError,
)
from reactor.model import checkpoints, codec
from reactor.model.context import Context
from reactor.model.engine_state import EngineState, Quarantine
from reactor.model.records import ContextRecord
from reactor.model.results import Failure
from reactor.model.status import RunStatus

__all__ = ["quarantine", "quarantine_info"]

log = logging.getLogger("reactor.engine")

#: Characters of the original text kept when the whole text does not fit the size limit.
_KEPT_PREFIX = 64 * 1024


def quarantine(env: Env, context_id: str, error: DeserializationError) -> Context | None:
    """Replace the unreadable record ``context_id`` by a ``failed`` quarantine document.

    The write happens only while the stored text is still the unreadable one (a record
    rewritten meanwhile is left alone), so calling this twice is harmless.

    Args:
        env: the execution environment.
        context_id: the run (or map element) whose document failed to decode.
        error: the decode error; its message is the stored reason.

    Returns:
        The quarantine context as stored (status ``failed``), or ``None`` when nothing was
        written: the record is gone, it is readable (e.g. once the reactor's codec types are
        registered), or its reactor is not registered in this process (a corrupt document
        cannot then be told from one holding types this process does not know).

    Raises:
        StorageError: the backend failed.
    """
    storage = env.storage
    record = storage.contexts.load(context_id)
    if record is None:
        return None
    try:  # an unknown codec tag may only mean this process has not registered the types yet
        registry.get(record.reactor).definition.register_codec_types()
    except UnknownReactorError:
        log.warning("event=quarantine_skipped context_id=%s reason=reactor %r not registered "
                    "here (cannot tell a corrupt document from unknown types)",
                    context_id, record.reactor)
        return None
    try:  # SecretKeyError (a DeserializationError): its secrets do not open with our keys
        secret_policy.open_context(env, Context.from_document(
            checkpoints.stored_document(record)))
    except DeserializationError:
        pass
    else:
        return None  # rewritten meanwhile: nothing to quarantine
    now = env.now()
    reason = f"{type(error).__name__}: {error}"
    info = Quarantine(
        reason=reason, original_status=record.status, original_document=_original_text(record)
    )
    ctx = Context(
        context_id=record.context_id,
        reactor=record.reactor,
        status=RunStatus.FAILED,
        engine_state=EngineState(quarantine=info),
        execution_trace=[{"type": "failed", "step": None, "at": now, "detail": reason}],
        failure=Failure(error, retryable=False, reactor_name=record.reactor),
        parent_context_id=record.parent_context_id,
        root_context_id=record.root_context_id,
        created_at=record.created_at,
        updated_at=now,
    )
    limit = env.settings.max_context_bytes
    try:
        document = codec.encode_document(ctx.to_document(), max_bytes=limit)
    except ContextTooLargeError:
        ctx.engine_state = EngineState(quarantine=info.truncated(_KEPT_PREFIX))
        document = codec.encode_document(ctx.to_document())
    storage.contexts.save(replace(record, status=RunStatus.FAILED.value, document=document,
                                  updated_at=now, base=new_base_id(), segments=()))
    log.error("event=context_quarantined context_id=%s original_status=%s reason=%s",
              context_id, record.status, reason)
    return ctx


def _original_text(record: ContextRecord) -> str:
    """The unreadable record's text: its document, or -- when segments follow it -- the JSON
    object ``{"base": document, "segments": [text, ...]}`` (docs/protocol.md, "Incremental
    checkpoints")."""
    if not record.segments:
        return record.document
    return json.dumps({"base": record.document, "segments": list(record.segments)})


def quarantine_info(ctx: Context) -> Quarantine | None:
    """The quarantine details of a context stored by :func:`quarantine`, else ``None``.

    Returns:
        The reason, the original status and the original text (or its prefix, with
        ``original_truncated`` set) (:class:`~reactor.model.engine_state.Quarantine`).
    """
    return ctx.engine_state.quarantine
