"""The reactor registry: registered name -> reactor class (docs/architecture.md, "Layers").

Workers and ``Reactor.undo``/``find`` resolve reactors by **registered name**, never by
importing a module path taken from stored data. Every ``Reactor`` subclass registers itself
when its class is created, under ``module.QualName`` or the ``name=`` class keyword.

Re-registering the same origin (``module.QualName``, e.g. a class re-created by a module reload
or a test helper called twice) replaces the entry; two different classes claiming one name is a
:class:`~reactor.errors.DefinitionError`.

**Retained definitions** (docs/deploys.md, "Operator tools"): a class declared with
``retained=True`` keeps an old release's definition of a reactor name importable beside the
current one. It is held apart, under its name *and* its definition's fingerprint
(:func:`register_retained`), never under the name alone: workers, ``get`` and ``names`` see
only the current class, and an operator call (undo, cancel, migrate) looks the retained one up
for a stored run whose fingerprint it matches (:func:`retained`).
"""

from __future__ import annotations

import threading
from typing import Any

from reactor.errors import DefinitionError, UnknownReactorError

__all__ = [
    "get", "names", "register", "register_retained", "retained", "unregister",
    "unregister_retained",
]

_lock = threading.Lock()
_entries: dict[str, tuple[str, Any]] = {}
_retained: dict[tuple[str, str], tuple[str, Any]] = {}


def _origin(cls: Any) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register(name: str, cls: Any) -> None:
    """Register ``cls`` under ``name``.

    Args:
        name: the registered name (non-empty).
        cls: the reactor class.

    Raises:
        DefinitionError: ``name`` is empty or already taken by a class of another origin.
    """
    if not name:
        raise DefinitionError("a reactor name must be a non-empty string")
    origin = _origin(cls)
    with _lock:
        existing = _entries.get(name)
        if existing is not None and existing[0] != origin:
            raise DefinitionError(
                f"reactor name {name!r} is already registered by {existing[0]} "
                f"(cannot register {origin})"
            )
        _entries[name] = (origin, cls)


def unregister(name: str) -> bool:
    """Remove ``name`` from the registry; returns whether it was registered."""
    with _lock:
        return _entries.pop(name, None) is not None


def get(name: str) -> Any:
    """Return the reactor class registered under ``name``.

    Raises:
        UnknownReactorError: nothing is registered under ``name``.
    """
    with _lock:
        entry = _entries.get(name)
    if entry is None:
        raise UnknownReactorError(f"no reactor is registered under {name!r}")
    return entry[1]


def names() -> list[str]:
    """All registered names, sorted."""
    with _lock:
        return sorted(_entries)


def register_retained(name: str, fingerprint: str, cls: Any) -> None:
    """Register ``cls`` as a retained definition of reactor ``name`` (see the module
    docstring): found by :func:`retained` for runs stored with ``fingerprint``, never by
    :func:`get`.

    Args:
        name: the reactor name the retained class declares (``name=`` class keyword).
        fingerprint: its definition's fingerprint (16 hex digits,
            ``reactor.dsl.fingerprint``).
        cls: the reactor class.

    Raises:
        DefinitionError: ``name`` is empty, or another origin already retains this
            name and fingerprint.
    """
    if not name:
        raise DefinitionError("a reactor name must be a non-empty string")
    origin = _origin(cls)
    with _lock:
        existing = _retained.get((name, fingerprint))
        if existing is not None and existing[0] != origin:
            raise DefinitionError(
                f"reactor name {name!r} with fingerprint {fingerprint} is already retained by "
                f"{existing[0]} (cannot retain {origin})"
            )
        _retained[(name, fingerprint)] = (origin, cls)


def retained(name: str, fingerprint: str) -> Any | None:
    """The retained class of reactor ``name`` whose definition has ``fingerprint``.

    Args:
        name: the reactor name.
        fingerprint: a stored run's definition fingerprint.

    Returns:
        The class, or ``None`` when none is retained for that pair.
    """
    with _lock:
        entry = _retained.get((name, fingerprint))
    return None if entry is None else entry[1]


def unregister_retained(name: str, fingerprint: str) -> bool:
    """Remove a retained definition; returns whether it was registered."""
    with _lock:
        return _retained.pop((name, fingerprint), None) is not None
