"""Saving and loading run contexts through ``storage.contexts`` (docs/concepts.md, "Stored runs").

A synchronous run is saved at the start (status ``running``), after every step (throttled by
``checkpoint_min_interval``, default 0 = every step) and at the end (docs/architecture.md,
"Execution invariants"). The first save of a context writes it whole under a new *base*;
every later one appends a segment holding only what changed since (docs/protocol.md,
"Incremental checkpoints"), so a step costs the same in a run of 10 steps or 1,000 and each
value is encoded once. A loaded context continues appending to the record it came from.
A composed child is embedded in its parent, so it is saved by saving the record that holds it;
a map element is its own record.

A checkpointer may *fence* its saves (:meth:`Checkpointer.fence`): the store then refuses the
write atomically when a newer holder of the run's lock already saved the record
(:class:`~reactor.errors.StaleWriterError`; docs/workers.md, "Stale writers and fenced
saves"). The plain :class:`Checkpointer` is unfenced; workers use
:class:`reactor.engine.liveness.FencedCheckpointer`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from reactor.engine import fast_paths, secret_policy
from reactor.engine.env import Env
from reactor.errors import DeserializationError
from reactor.model import checkpoints, codec
from reactor.model.context import Context
from reactor.model.ids import random_hex
from reactor.model.records import ContextDelta, ContextRecord, Fence
from reactor.ports.capabilities import AppendsContexts, declares

__all__ = [
    "Checkpointer",
    "decode_context",
    "load_context",
    "new_base_id",
    "size_limit",
    "whole_record",
]


class Checkpointer:
    """Saves one stored context (the record that holds the contexts being executed).

    Args:
        env: the execution environment.
        record_context: the context stored as its own record (a root run or a map element).
    """

    def __init__(self, env: Env, record_context: Context) -> None:
        self.env = env
        self.context = record_context
        self._last_save: float | None = None
        #: Claim paths of the run each incremental checkpoint also reads where the store can
        #: (:func:`reactor.engine.fast_paths.append_reading_claims`): a root run's cancel
        #: request (docs/run-control.md, "Cancel"). ``()``: none.
        self.noting: tuple[str, ...] = ()
        #: The claims the last such checkpoint read, and when (the runtime clock's
        #: ``monotonic()``); ``None``: no checkpoint read them yet.
        self.noted: dict[str, str] = {}
        self.noted_at: float | None = None
        #: The secret sealer of this execution's saves, resolved at the first save (the keys
        #: and the backend do not change within one execution).
        self._sealer: tuple[Callable[[Any], Any] | None] | None = None

    def fence(self) -> Fence | None:
        """The fence every save of this checkpointer carries; ``None`` (unfenced) here.

        Returns:
            A :class:`~reactor.model.records.Fence`, or ``None`` for an unfenced save (last
            writer wins).
        """
        return None

    def save(self, *, force: bool = True) -> None:
        """Checkpoint the record (fenced with :meth:`fence` when it gives one).

        An incremental checkpoint (one segment holding what changed since the last save:
        docs/protocol.md, "Incremental checkpoints") when the stored record is known
        (``ctx.persisted``) and the store can append; else, or when the store refuses the
        append (another base or segment count: the stored record is not this writer's view),
        or when the segments would pass ``max_context_bytes``, a full save of the whole
        document under a new base.

        Args:
            force: ``False`` for a per-step checkpoint, which is skipped when the previous save
                is younger than ``checkpoint_min_interval`` seconds.

        Raises:
            EncodeError: a value in the context cannot be encoded (nothing is written).
            ConfigurationError: the context holds secrets, no key is configured and plaintext
                is not allowed (docs/security.md, "Secure by default"; nothing is written).
            ContextTooLargeError: the document exceeds ``max_context_bytes`` (nothing written).
            StaleWriterError: the save was fenced and a newer holder of the lock already saved
                the record (nothing written; the in-memory context keeps its new values but the
                caller must stop: the run is not its own any more).
            StorageError: the backend failed.
        """
        now = self.env.now()
        interval = self.env.settings.checkpoint_min_interval
        if (
            not force
            and interval > 0
            and self._last_save is not None
            and now - self._last_save < interval
        ):
            return
        ctx = self.context
        if not ctx.created_at:
            ctx.created_at = now
        previous_update = ctx.updated_at
        ctx.updated_at = now
        try:
            if self._sealer is None:
                self._sealer = (secret_policy.sealer(self.env),)
            seal = self._sealer[0]
            if not self._append(seal):
                self._save_whole(seal)
        except BaseException:
            ctx.updated_at = previous_update
            raise
        self._last_save = now

    def _append(self, seal: Callable[[Any], Any] | None) -> bool:
        """Store one segment; ``False`` when a full save is needed instead."""
        ctx = self.context
        persisted = ctx.persisted
        if persisted is None or not persisted.base or not declares(
            self.env.storage.contexts, AppendsContexts
        ):
            return False  # a store without incremental checkpoints saves whole contexts
        delta = checkpoints.DeltaDocument(ctx, seal)
        text = codec.encode_document(delta.document)
        size = len(text.encode("utf-8"))
        limit = size_limit(self.env)
        if limit is not None and persisted.size + size > limit:
            return False  # the whole document may still fit: the full save decides
        record = ContextDelta(
            context_id=ctx.context_id,
            base=persisted.base,
            position=persisted.position + 1,
            status=ctx.status.value,
            updated_at=ctx.updated_at,
            segment=text,
        )
        appended = self.write_segment(record)
        if appended:
            delta.written(size)
        return appended

    def _save_whole(self, seal: Callable[[Any], Any] | None) -> None:
        ctx = self.context
        record = whole_record(self.env, ctx, seal)
        self.write_whole(record)
        checkpoints.mark_persisted(
            ctx, base=record.base, position=0, size=len(record.document.encode("utf-8"))
        )

    def write_segment(self, delta: ContextDelta) -> bool:
        """Send one incremental checkpoint (``AppendsContexts.append``, fenced with
        :meth:`fence` when it gives one); a subclass may send it with a lock operation. Called
        only for a context store that declares
        :class:`~reactor.ports.capabilities.AppendsContexts`.

        Returns:
            Whether it was appended (``False``: a full save is needed).

        Raises:
            StaleWriterError, ContextTooLargeError, StorageError: as ``append``.
        """
        fence = self.fence()
        if self.noting:
            appended, claims = fast_paths.append_reading_claims(
                self.env.storage, delta, fence, self.noting
            )
            if claims is not None:
                self.noted, self.noted_at = claims, self.env.clock.monotonic()
            return appended
        store = cast(AppendsContexts, self.env.storage.contexts)  # checked by _append
        return bool(store.append(delta) if fence is None else store.append(delta, fence=fence))

    def write_whole(self, record: ContextRecord) -> None:
        """Send one full save (``ContextStore.save``, fenced with :meth:`fence` when it gives
        one); a subclass may send it with a lock operation.

        Raises:
            StaleWriterError, ContextTooLargeError, StorageError: as ``save``.
        """
        fence = self.fence()
        if fence is None:  # the one-argument call: stores written before fences keep working
            self.env.storage.contexts.save(record)
        else:
            self.env.storage.contexts.save(record, fence=fence)


def whole_record(
    env: Env, ctx: Context, seal: Callable[[Any], Any] | None
) -> ContextRecord:
    """The record of a full save of ``ctx`` under a new base (nothing is written).

    Args:
        env: the environment (its ``max_context_bytes`` and its storage's document limit).
        ctx: the context, its timestamps already stamped.
        seal: the secret sealer (:func:`reactor.engine.secret_policy.sealer`).

    Raises:
        EncodeError: a value cannot be encoded.
        ContextTooLargeError: the document exceeds ``max_context_bytes`` or the storage's
            ``Capabilities.max_document_bytes``.
    """
    document = codec.encode_document(ctx.to_document(seal=seal), max_bytes=size_limit(env))
    return ContextRecord(
        context_id=ctx.context_id,
        reactor=ctx.reactor,
        status=ctx.status.value,
        document=document,
        created_at=ctx.created_at,
        updated_at=ctx.updated_at,
        parent_context_id=ctx.parent_context_id,
        root_context_id=ctx.root_context_id,
        # an async_reactor child: a parent, no map (docs/run-control.md, "async_reactor")
        dispatched_child=ctx.parent_context_id is not None and ctx.map_metadata is None,
        base=new_base_id(),
    )


def size_limit(env: Env) -> int | None:
    """The most bytes a stored run may take: the smaller of ``max_context_bytes`` and the
    storage's ``Capabilities.max_document_bytes`` (``None``: no limit)."""
    limits = [env.settings.max_context_bytes, env.storage.capabilities.max_document_bytes]
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def new_base_id() -> str:
    """A fresh base id for a full save: 12 random hex digits (48 bits)."""
    return random_hex(6)


def load_context(env: Env, context_id: str, *, open_secrets: bool = True) -> Context | None:
    """Load and decode a stored context.

    Args:
        env: the execution environment.
        context_id: the run id.
        open_secrets: decrypt its sealed secrets (:func:`reactor.engine.secret_policy.
            open_context`), for a caller that runs the context's steps, undos or
            compensates; ``False`` for a reader that only shows or polls it (values stay
            :class:`~reactor.model.secrets.Sealed`; no key needed).

    Returns:
        The context, or ``None`` when no record exists.

    Raises:
        DeserializationError: the stored document is malformed (the message names the run).
        SchemaVersionError: the stored document has an unknown ``schema_version`` (the message
            names the run).
        SecretKeyError: a secret cannot be decrypted with the configured keys (a
            ``DeserializationError``: callers quarantine the run; the message names the run).
    """
    record = env.storage.contexts.load(context_id)
    if record is None:
        return None
    return decode_context(env, record, open_secrets=open_secrets)


def decode_context(env: Env, record: ContextRecord, *, open_secrets: bool = True) -> Context:
    """Decode a loaded record (:func:`load_context` without the load: a record read together
    with its lock, docs/protocol.md, "Optional fast paths").

    Args:
        env: the execution environment.
        record: the stored record.
        open_secrets: as in :func:`load_context`.

    Returns:
        The context; appended to by its next checkpoint unless it is a sealed reader's view or
        was sealed with a retired key.

    Raises:
        DeserializationError, SchemaVersionError, SecretKeyError: as :func:`load_context`.
    """
    context_id = record.context_id
    try:
        ctx = Context.from_document(checkpoints.stored_document(record))
        resealed = open_secrets and secret_policy.open_context_to_write(env, ctx)
    except DeserializationError as exc:  # SchemaVersionError too: keep the class
        raise type(exc)(f"stored run {context_id!r} is unreadable: {exc}") from exc
    # A reader's sealed view is never appended to; a run sealed with a retired key is saved
    # whole next time (re-sealed with the first key).
    if record.base and open_secrets and not resealed:
        checkpoints.mark_persisted(
            ctx, base=record.base, position=len(record.segments), size=record.stored_bytes
        )
    return ctx
