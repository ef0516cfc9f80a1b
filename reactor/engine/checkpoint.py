"""Saving and loading run contexts through ``storage.contexts`` (docs/concepts.md, "Stored runs").

A synchronous run is saved at the start (status ``running``), after every step (throttled by
``checkpoint_min_interval``, default 0 = every step) and at the end (docs/architecture.md,
"Execution invariants").
A composed child is embedded in its parent, so it is saved by saving the record that holds it;
a map element is its own record.

A checkpointer may *fence* its saves (:meth:`Checkpointer.fence`): the store then refuses the
write atomically when a newer holder of the run's lock already saved the record
(:class:`~reactor.errors.StaleWriterError`; docs/workers.md, "Stale writers and fenced
saves"). The plain :class:`Checkpointer` is unfenced; workers use
:class:`reactor.engine.liveness.FencedCheckpointer`.
"""

from __future__ import annotations

from reactor.engine import secret_policy
from reactor.engine.env import Env
from reactor.errors import DeserializationError
from reactor.model import codec
from reactor.model.context import Context
from reactor.model.records import ContextRecord, Fence

__all__ = ["Checkpointer", "load_context"]


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

    def fence(self) -> Fence | None:
        """The fence every save of this checkpointer carries; ``None`` (unfenced) here.

        Returns:
            A :class:`~reactor.model.records.Fence`, or ``None`` for an unfenced save (last
            writer wins).
        """
        return None

    def save(self, *, force: bool = True) -> None:
        """Encode and save the record (fenced with :meth:`fence` when it gives one).

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
            document = codec.encode_document(
                ctx.to_document(seal=secret_policy.sealer(self.env)),
                max_bytes=self.env.settings.max_context_bytes,
            )
        except BaseException:
            ctx.updated_at = previous_update
            raise
        record = ContextRecord(
            context_id=ctx.context_id,
            reactor=ctx.reactor,
            status=ctx.status.value,
            document=document,
            created_at=ctx.created_at,
            updated_at=now,
            parent_context_id=ctx.parent_context_id,
            root_context_id=ctx.root_context_id,
        )
        fence = self.fence()
        if fence is None:  # the one-argument call: stores written before fences keep working
            self.env.storage.contexts.save(record)
        else:
            self.env.storage.contexts.save(record, fence=fence)
        self._last_save = now


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
    try:
        ctx = Context.from_document(codec.decode_document(record.document))
        return secret_policy.open_context(env, ctx) if open_secrets else ctx
    except DeserializationError as exc:  # SchemaVersionError too: keep the class
        raise type(exc)(f"stored run {context_id!r} is unreadable: {exc}") from exc
