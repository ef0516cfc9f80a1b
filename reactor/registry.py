"""The reactor registry: registered name -> reactor class (docs/architecture.md, "Layers").

Workers and ``Reactor.undo``/``find`` resolve reactors by **registered name**, never by
importing a module path taken from stored data. Every ``Reactor`` subclass registers itself
when its class is created, under ``module.QualName`` or the ``name=`` class keyword.

Re-registering the same origin (``module.QualName``, e.g. a class re-created by a module reload
or a test helper called twice) replaces the entry; two different classes claiming one name is a
:class:`~reactor.errors.DefinitionError`.
"""

from __future__ import annotations

import threading
from typing import Any

from reactor.errors import DefinitionError, UnknownReactorError

__all__ = ["get", "names", "register", "unregister"]

_lock = threading.Lock()
_entries: dict[str, tuple[str, Any]] = {}


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
