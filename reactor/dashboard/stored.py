"""One stored run as the dashboard reads it (docs/dashboard.md, "What is shown").

:meth:`StoredRun.load` reads the record, folds its incremental checkpoints into one document
(docs/protocol.md, "Incremental checkpoints") and masks it with
:func:`reactor.model.masking.mask_document` before anything else looks at it. The engine's
bookkeeping (``private_data``) is read as the typed
:class:`~reactor.model.engine_state.EngineState`. The reactor's definition (for the step graph
and the coordination view) comes from the registry, when this process imported the reactor;
the decoded context (for coordination keys computed from typed inputs) is decoded on demand,
without opening any secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reactor import registry
from reactor.config import Runtime
from reactor.dashboard.errors import BackendUnavailable, BadRequest, NotFound
from reactor.dsl.definition import ReactorDefinition
from reactor.engine import decode_context, make_env
from reactor.errors import DeserializationError, ReactorError, StorageError, UnknownReactorError
from reactor.model.checkpoints import raw_document
from reactor.model.context import Context
from reactor.model.engine_state import EngineState
from reactor.model.masking import mask_document
from reactor.model.records import ContextRecord
from reactor.model.text import printable

__all__ = ["MAX_ID_LENGTH", "StoredRun", "check_id", "definition_of", "engine_state_of"]

#: The longest run id (or other record id) the dashboard accepts in a URL.
MAX_ID_LENGTH = 200


def check_id(value: str, what: str = "run id") -> str:
    """Refuse an id no store could hold: empty, too long, or with control characters.

    Raises:
        BadRequest: the id is malformed.
    """
    if not value or len(value) > MAX_ID_LENGTH or printable(value) != value:
        raise BadRequest(f"malformed {what}", code="bad_id")
    return value


def definition_of(name: str) -> tuple[ReactorDefinition | None, str | None]:
    """The registered definition of reactor ``name``, or why there is none.

    Returns:
        ``(definition, None)``, or ``(None, reason)`` when this process did not import it.
    """
    try:
        definition = registry.get(name).definition
    except UnknownReactorError:
        return None, (
            f"reactor {name!r} is not registered in the dashboard process "
            "(start the dashboard with --import for the module that defines it)"
        )
    if not isinstance(definition, ReactorDefinition):
        return None, f"reactor {name!r} has no definition"
    return definition, None


def engine_state_of(document: dict[str, Any] | None) -> EngineState:
    """The typed engine state of a (masked) document; the defaults when it is unreadable."""
    private = document.get("private_data") if document is not None else None
    if not isinstance(private, dict):
        return EngineState()
    try:
        return EngineState.from_json(private)
    except (DeserializationError, ValueError, TypeError):
        return EngineState()


@dataclass
class StoredRun:
    """A stored run, loaded and masked.

    Attributes:
        runtime: where it was read from.
        record: the stored record.
        document: the whole document, masked (``None`` when unreadable).
        document_error: why the document could not be read, else ``None``.
        engine_state: the typed ``private_data`` (defaults when unreadable).
        definition: the reactor's definition, when registered in this process.
        definition_error: why there is no definition, else ``None``.
    """

    runtime: Runtime
    record: ContextRecord
    document: dict[str, Any] | None
    document_error: str | None
    engine_state: EngineState
    definition: ReactorDefinition | None
    definition_error: str | None
    _context: Context | None = field(default=None, repr=False)
    _context_error: str | None = field(default=None, repr=False)

    @classmethod
    def load(cls, runtime: Runtime, run_id: str) -> StoredRun:
        """Read and mask stored run ``run_id``.

        Raises:
            BadRequest: the id is malformed.
            NotFound: no such run.
            BackendUnavailable: the storage failed.
        """
        check_id(run_id)
        try:
            record = runtime.storage.contexts.load(run_id)
        except StorageError as exc:
            raise BackendUnavailable(f"the storage failed: {exc}") from exc
        if record is None:
            raise NotFound(f"no run {run_id!r}", code="run_not_found")
        document: dict[str, Any] | None = None
        error: str | None = None
        try:
            document = mask_document(raw_document(record))
        except (DeserializationError, RecursionError) as exc:
            error = f"the stored document is not readable: {exc}"
        definition, definition_error = definition_of(record.reactor)
        return cls(
            runtime=runtime, record=record, document=document, document_error=error,
            engine_state=engine_state_of(document), definition=definition,
            definition_error=definition_error,
        )

    def context(self) -> tuple[Context | None, str | None]:
        """The decoded context, secrets left sealed (for coordination keys), or why not.

        Returns:
            ``(context, None)``, or ``(None, reason)`` when the document cannot be decoded
            here (an unregistered value type, a malformed document).
        """
        if self._context is not None or self._context_error is not None:
            return self._context, self._context_error
        if self.definition is not None:
            self.definition.register_codec_types()
        try:
            self._context = decode_context(make_env(self.runtime), self.record,
                                           open_secrets=False)
        except ReactorError as exc:
            self._context_error = f"the stored run cannot be decoded here: {exc}"
        except (RecursionError, ValueError, TypeError) as exc:
            self._context_error = f"the stored run cannot be decoded here: {exc}"
        return self._context, self._context_error
