"""Which keys a runtime seals secrets with, and when plaintext is allowed (docs/security.md).

* **Keys** (docs/security.md, "Keys"): the ``secret_keys`` setting when it is set, else the
  ``REACTOR_SECRET_KEYS`` environment variable (comma-separated), read at each use so a
  process picks up a rotated list on its next configure. The first key encrypts; any decrypts.
* **Secure by default** (docs/security.md, "Secure by default"): a reactor with secrets
  (``redact=True`` inputs, or arguments fed from them) that runs on anything but the
  in-process backends (``memory://`` storage with the ``inline://``/``local://`` router) and
  has no key raises :class:`~reactor.errors.ConfigurationError` naming
  ``REACTOR_SECRET_KEYS``/``secret_keys`` before anything is stored.
  ``allow_plaintext_secrets=True`` stores them in clear instead and logs one warning per
  process (docs/security.md, "Opting out").
* **Opening** happens only when a stored context is loaded to run its steps, undos or
  compensates (:func:`open_context`); a wrong or missing key raises
  :class:`~reactor.model.secrets.SecretKeyError`, and the caller quarantines the run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from reactor.config import Runtime, Settings
from reactor.dsl.definition import ReactorDefinition
from reactor.engine.env import Env
from reactor.errors import ConfigurationError
from reactor.model.context import Context
from reactor.model.run_records import RollbackState, UndoEntry
from reactor.model.secrets import (
    ENV_VAR,
    Keyring,
    Sealed,
    configured_specs,
    open_values,
)
from reactor.ports import capabilities

__all__ = [
    "check",
    "check_worker",
    "has_secrets",
    "in_process",
    "keyring",
    "open_context",
    "open_context_to_write",
    "sealer",
]

log = logging.getLogger("reactor.secrets")

_lock = threading.Lock()
_cache: dict[tuple[str, tuple[str, ...]], Keyring] = {}
_CACHE_SIZE = 8
_warned = False


def keyring(settings: Settings) -> Keyring:
    """The keyring of ``settings``: ``secret_keys``, else ``REACTOR_SECRET_KEYS``
    (docs/security.md, "Keys"). The variable is read at every call; keyrings are cached.

    Args:
        settings: the runtime's settings.

    Returns:
        The keyring (possibly empty).

    Raises:
        ConfigurationError: a key is malformed (the message names the setting or the variable
            and the key's position, never its text).
    """
    source, specs = _specs(settings)
    cache_key = (source, specs)
    with _lock:
        ring = _cache.get(cache_key)
    if ring is None:
        ring = Keyring(specs, source=source)
        with _lock:
            if len(_cache) >= _CACHE_SIZE:
                _cache.clear()
            _cache[cache_key] = ring
    return ring


def _specs(settings: Settings) -> tuple[str, tuple[str, ...]]:
    """``(source, key specs)``: the ``secret_keys`` setting, else the environment variable."""
    return configured_specs(settings.secret_keys)


def in_process(runtime: Runtime) -> bool:
    """Whether ``runtime`` keeps everything in this process, where secrets may stay in clear
    without a key (docs/security.md, "Secure by default").

    Args:
        runtime: the storage, router and settings in use.

    Returns:
        ``True`` only when both the storage and the router declare
        :class:`~reactor.ports.capabilities.InProcess` (the built-in ``memory://`` storage
        with the ``inline://`` or ``local://`` router; a wrapper around them counts as another
        backend).
    """
    return capabilities.in_process(runtime.storage) and capabilities.in_process(runtime.router)


def has_secrets(definition: ReactorDefinition) -> bool:
    """Whether a run of ``definition`` (its composed and map children included) can hold
    secrets: ``redact=True`` inputs, or step arguments fed from them (docs/security.md,
    "What is encrypted").

    Args:
        definition: the reactor's definition.

    Returns:
        ``True`` when at least one value would be sealed.
    """
    if definition.contract.redacted or any(definition.redacted_arguments.values()):
        return True
    return any(has_secrets(child) for child in definition.children.values())


def _plaintext_allowed(runtime: Runtime) -> bool:
    global _warned
    if in_process(runtime):
        return True
    if not runtime.settings.allow_plaintext_secrets:
        return False
    with _lock:
        first, _warned = not _warned, True
    if first:
        log.warning(
            "event=plaintext_secrets SECRETS ARE STORED UNENCRYPTED: allow_plaintext_secrets "
            "is set and no key is configured (%s / secret_keys); anyone who reads the "
            "storage, its logs or backups reads every redact=True value (docs/security.md)",
            ENV_VAR,
        )
    return True


def _missing_key(what: str) -> ConfigurationError:
    return ConfigurationError(
        f"{what} holds redact=True values but no secret key is configured: set {ENV_VAR} "
        "(comma-separated base64url keys of 32 bytes) or the secret_keys setting, or "
        "allow_plaintext_secrets=True to store them unencrypted (docs/security.md)"
    )


def check(definition: ReactorDefinition, env: Env) -> None:
    """Refuse to start a run whose secrets would be stored in clear (docs/security.md,
    "Secure by default"); with ``allow_plaintext_secrets`` log the one warning instead
    ("Opting out").

    Args:
        definition: the reactor about to run.
        env: the execution environment.

    Raises:
        ConfigurationError: ``definition`` has secrets, the runtime is not in-process, no
            key is configured and ``allow_plaintext_secrets`` is off; or a key is malformed.
    """
    if not has_secrets(definition):
        return
    if keyring(env.settings) or _plaintext_allowed(env.runtime):
        return
    raise _missing_key(f"reactor {definition.name!r}")


def check_worker(runtime: Runtime, definitions: Iterable[ReactorDefinition]) -> None:
    """Refuse to start a worker that would open runs it cannot decrypt: the reactors it
    serves hold secrets, the runtime is not in-process, no key is configured and
    ``allow_plaintext_secrets`` is off (docs/security.md, "When a key is wrong or missing").

    Without this a worker deployed without ``REACTOR_SECRET_KEYS`` would quarantine, as
    ``failed``, every sealed run it picks up.

    Args:
        runtime: the worker's runtime.
        definitions: the registered reactors the worker serves.

    Raises:
        ConfigurationError: naming the reactors with secrets and the setting to set.
    """
    with_secrets = sorted(d.name for d in definitions if has_secrets(d))
    if not with_secrets or keyring(runtime.settings) or _plaintext_allowed(runtime):
        return
    shown = ", ".join(repr(name) for name in with_secrets[:5])
    more = f" and {len(with_secrets) - 5} more" if len(with_secrets) > 5 else ""
    raise _missing_key(f"this worker serves reactors whose runs ({shown}{more})")


def sealer(env: Env) -> Callable[[Any], Any] | None:
    """The ``seal`` function a checkpoint passes to :meth:`Context.to_document`
    (docs/security.md, "What is encrypted").

    Args:
        env: the execution environment (its settings give the keys, its runtime the backend).

    Returns:
        The keyring's :meth:`~reactor.model.secrets.Keyring.seal`; ``None`` (store in clear)
        when no key is configured and plaintext is allowed; otherwise a function that raises
        :class:`ConfigurationError` when it is called (only contexts holding secrets call it).

    Raises:
        ConfigurationError: (when the returned function is called) a key is malformed; a
            context without secrets never calls it, so it is not affected.
    """
    settings = env.settings
    if _specs(settings)[1]:
        def seal(value: Any) -> Any:
            return keyring(settings).seal(value)

        return seal
    if _plaintext_allowed(env.runtime):
        return None

    def refuse(value: Any) -> Any:
        if isinstance(value, Sealed):  # already sealed (a run loaded without opening it)
            return value
        raise _missing_key("this run")

    return refuse


class _LazyKeyring:
    """Builds the keyring on the first sealed value only (a run without secrets never needs
    one, even when the key configuration is broken)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._ring: Keyring | None = None

    def open(self, sealed: Sealed) -> Any:
        if self._ring is None:
            self._ring = keyring(self._settings)
        value = self._ring.open(sealed)
        if sealed.kid != self._ring.kids[0]:
            self.opened_retired = True
        return value

    #: A value was sealed with a key other than the first (the encrypting) one.
    opened_retired = False


def open_context(env: Env, ctx: Context) -> Context:
    """Decrypt, in place, the sealed values of a loaded context (and its composed children).

    Called where a stored context is loaded to run it (docs/security.md, "Where secrets are
    decrypted"); views (``find()``, ``reactor runs show``) never call it.

    Args:
        env: the execution environment (its settings give the keys).
        ctx: the context as decoded.

    Returns:
        ``ctx``.

    Raises:
        SecretKeyError: a sealed value names a key that is not configured, or the key does
            not open it.
        ConfigurationError: a key is malformed.
    """
    _open(ctx, _LazyKeyring(env.settings))
    return ctx


def open_context_to_write(env: Env, ctx: Context) -> bool:
    """Decrypt a loaded context in place, like :func:`open_context`, for a writer that will
    checkpoint it.

    Returns:
        ``True`` when a value was sealed with a key other than the first configured one, or a
        secret is stored in clear although keys are configured now: the writer saves the
        context whole (every secret sealed with the first key, so a retired key can be
        removed, and secrets stored before encryption was turned on get sealed, once runs
        have been written again) instead of appending to it (docs/security.md, "Keys";
        docs/protocol.md, "Incremental checkpoints").

    Raises:
        SecretKeyError, ConfigurationError: as :func:`open_context`.
    """
    in_clear = bool(keyring(env.settings)) and _secrets_in_clear(ctx)
    ring = _LazyKeyring(env.settings)
    _open(ctx, ring)
    return ring.opened_retired or in_clear


def _secrets_in_clear(ctx: Context) -> bool:
    """Whether a secret of ``ctx`` (a redacted input, or a redacted argument of an undo entry
    or of the rollback record, here or in a composed child) is stored unsealed: written
    before a key was configured."""

    def clear(values: Any, names: Any) -> bool:
        if not isinstance(values, dict) or not isinstance(names, list | tuple):
            return False
        return any(n in values and not isinstance(values[n], Sealed) for n in names)

    if clear(ctx.inputs, ctx.redacted):
        return True
    entries: list[UndoEntry | RollbackState] = [*ctx.undo_stack]
    if ctx.rollback is not None:
        entries.append(ctx.rollback)
    if any(clear(dict(entry.arguments), entry.redacted) for entry in entries):
        return True
    return any(
        isinstance(child, Context) and _secrets_in_clear(child)
        for child in ctx.composed_contexts.values()
    )


def _open(ctx: Context, ring: Any) -> None:
    ctx.inputs = open_values(ctx.inputs, ring)
    ctx.undo_stack = [_opened_entry(entry, ring) for entry in ctx.undo_stack]
    if ctx.rollback is not None:
        rb = ctx.rollback
        arguments, extra = _opened(rb.arguments, ring), _opened(rb.extra, ring)
        if arguments is not rb.arguments or extra is not rb.extra:
            ctx.rollback = replace(rb, arguments=arguments, extra=extra)
    for value in ctx.composed_contexts.values():
        if isinstance(value, Context):
            _open(value, ring)


def _opened(values: Mapping[str, Any], ring: Any) -> Mapping[str, Any]:
    """``values`` with its sealed values opened; ``values`` itself when it holds none."""
    opened: Mapping[str, Any] = open_values(
        values if isinstance(values, dict) else dict(values), ring
    )
    return opened


def _opened_entry(entry: UndoEntry, ring: Any) -> UndoEntry:
    """An undo entry with the sealed values of its arguments, result and unknown keys opened
    (``entry`` itself, the very object, when it holds none: an incremental checkpoint finds
    what changed by identity)."""
    arguments, extra = _opened(entry.arguments, ring), _opened(entry.extra, ring)
    result = open_values(entry.result, ring)
    if arguments is entry.arguments and extra is entry.extra and result is entry.result:
        return entry
    return replace(entry, arguments=arguments, extra=extra, result=result)
