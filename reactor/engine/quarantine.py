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

Once the cause is fixed (the codec types registered, the right secret key configured),
:func:`restore` (``reactor runs restore RUN_ID``) puts the original record back — its base and
its segments, with its original status — after checking that it now decodes here
(docs/run-control.md, "Restoring a quarantined run").
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace

from reactor import registry
from reactor.engine import liveness, secret_policy
from reactor.engine.checkpoint import decode_context, new_base_id
from reactor.engine.env import Env
from reactor.errors import (
    ContextTooLargeError,
    DeserializationError,
    LockAcquisitionError,
    QuarantineRestoreError,
    RunNotFoundError,
    RunStateError,
    UnknownReactorError,
)
from reactor.model import checkpoints, codec
from reactor.model.context import Context
from reactor.model.engine_state import EngineState, Quarantine
from reactor.model.keys import run_liveness_key
from reactor.model.records import ContextRecord
from reactor.model.results import Failure
from reactor.model.run_records import TraceRecord
from reactor.model.status import RunStatus

__all__ = ["RestoredRun", "quarantine", "quarantine_info", "restore"]

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
        execution_trace=[TraceRecord("failed", None, now, {"detail": reason})],
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


@dataclass(frozen=True)
class RestoredRun:
    """What :func:`restore` put back (docs/run-control.md, "Restoring a quarantined run").

    Attributes:
        run_id: the run.
        reactor: its reactor's registered name.
        status: the status it was restored with (the one it had when it was quarantined).
        segments: how many incremental checkpoints follow its restored base (docs/protocol.md,
            "Incremental checkpoints").
        reason: why it had been quarantined (``"<ErrorClass>: <message>"``).
    """

    run_id: str
    reactor: str
    status: RunStatus
    segments: int
    reason: str


def restore(env: Env, run_id: str) -> RestoredRun:
    """Put a quarantined run's original record back once it decodes again.

    The quarantine document keeps the unreadable record's text
    (``private_data.quarantine.original_document``: its document, or ``{"base", "segments"}``
    when checkpoints were appended to it). When that text now decodes here — the run's reactor
    registered (and with it its codec types), its sealed secrets opening with the configured
    keys — the record is stored again as it was: the same base document and segments (under a
    new base id), the original status, the original parent and timestamps of creation. The
    write happens under the run's liveness lock ``async:<id>``, fenced, and only while the
    stored record is still the quarantine document this call read. Nothing is re-enqueued: a
    restored ``running`` (or ``rolling_back``) run is continued by the next run sweep
    (docs/workers.md), a restored finished run is only readable again.

    Args:
        env: the execution environment.
        run_id: the quarantined run.

    Returns:
        What was restored (:class:`RestoredRun`).

    Raises:
        RunNotFoundError: no stored run ``run_id``.
        RunStateError: the run is not quarantined (its stored document is readable and has no
            quarantine, or it is unreadable and was never quarantined), it is a map element
            (its map settled it as failed when it was quarantined: retry or undo the top-level
            run instead), or it changed while it was being restored.
        UnknownReactorError: its reactor is not registered in this process (import the module
            that defines it: its codec types are registered with it).
        QuarantineRestoreError: the kept text still does not decode (``exc.reason``), was kept
            only in part, or is not a stored run of this id and reactor (``exc.field``);
            nothing was written.
        LockAcquisitionError: another process holds the run's liveness lock.
        ContextTooLargeError, StaleWriterError, StorageError: the write failed.
    """
    storage = env.storage
    record = storage.contexts.load(run_id)
    if record is None:
        raise RunNotFoundError(f"no stored run {run_id!r}", run_id=run_id)
    info = _quarantine_of(env, record)
    if record.parent_context_id is not None and not record.dispatched_child:
        raise RunStateError(
            f"run {run_id!r} is a map element of run {record.root_context_id!r}: its map "
            "settled it as failed when it was quarantined, so it cannot be restored alone "
            "(retry or undo the top-level run)", run_id=run_id, status=record.status,
        )
    if info.original_truncated:
        raise QuarantineRestoreError(
            f"run {run_id!r} cannot be restored: only the first "
            f"{len(info.original_document)} characters of its original document were kept "
            "(it was over the size limit)", run_id=run_id, field="original_document",
        )
    try:
        status = RunStatus.parse(info.original_status)
    except ValueError:
        raise QuarantineRestoreError(
            f"run {run_id!r} cannot be restored: its kept original_status "
            f"{info.original_status!r} is not a run status", run_id=run_id,
            field="original_status",
        ) from None
    registry.get(record.reactor).definition.register_codec_types()  # UnknownReactorError
    base, segments = _split_original(info.original_document)
    original = replace(record, status=status.value, document=base, segments=segments,
                       base=new_base_id(), updated_at=env.now())
    try:
        ctx = decode_context(env, original)  # its secrets too: what a worker will need
    except DeserializationError as exc:
        reason = f"{type(exc).__name__}: {exc}"
        before = "" if reason == info.reason else f" (it was quarantined for {info.reason})"
        raise QuarantineRestoreError(
            f"run {run_id!r} still does not decode: {reason}{before}. Fix the cause (import "
            "the module that registers its types, configure the secret key it was sealed "
            "with) and restore it again; nothing was written",
            run_id=run_id, field="original_document", reason=reason,
        ) from exc
    if ctx.context_id != run_id or ctx.reactor != record.reactor:
        raise QuarantineRestoreError(
            f"run {run_id!r} cannot be restored: its kept original document is run "
            f"{ctx.context_id!r} of reactor {ctx.reactor!r}, not run {run_id!r} of "
            f"{record.reactor!r}", run_id=run_id, field="original_document",
        )
    hold = liveness.take(env, run_id)
    if hold is None:
        raise LockAcquisitionError(
            f"run {run_id!r} is locked by another process (its liveness lock is held); "
            "restore it again later", key=run_liveness_key(run_id),
        )
    try:
        if storage.contexts.load(run_id) != record:
            raise RunStateError(
                f"run {run_id!r} changed while it was being restored; nothing was written",
                run_id=run_id, status=record.status,
            )
        fence = hold.fence()
        if fence is None:
            storage.contexts.save(original)
        else:
            storage.contexts.save(original, fence=fence)
    finally:
        hold.release()
    log.warning("event=context_restored context_id=%s status=%s segments=%d reason=%s",
                run_id, status.value, len(segments), info.reason)
    return RestoredRun(run_id=run_id, reactor=record.reactor, status=status,
                       segments=len(segments), reason=info.reason)


def _quarantine_of(env: Env, record: ContextRecord) -> Quarantine:
    """The quarantine details of a stored record.

    Raises:
        RunStateError: the record is not a quarantine document.
    """
    try:
        ctx = decode_context(env, record, open_secrets=False)
    except DeserializationError as exc:
        raise RunStateError(
            f"run {record.context_id!r} is not quarantined: its stored document is "
            f"unreadable ({exc}) and no worker quarantined it yet",
            run_id=record.context_id, status=record.status,
        ) from exc
    info = quarantine_info(ctx)
    if info is None:
        raise RunStateError(
            f"run {record.context_id!r} is {ctx.status.value} and not quarantined: there is "
            "nothing to restore", run_id=record.context_id, status=ctx.status.value,
        )
    return info


def _split_original(text: str) -> tuple[str, tuple[str, ...]]:
    """The base document and the segments of a kept original (see :func:`_original_text`).

    A run's own document never has exactly the keys ``base`` and ``segments`` (it has
    ``schema_version``, ``context_id``...), so the wrapper is told from a plain document.
    """
    try:
        value = json.loads(text)
    except ValueError:
        return text, ()  # the unreadable text itself
    if isinstance(value, dict) and set(value) == {"base", "segments"}:
        base, segments = value["base"], value["segments"]
        if isinstance(base, str) and isinstance(segments, list) and all(
            isinstance(segment, str) for segment in segments
        ):
            return base, tuple(segments)
    return text, ()
