"""Argument templates: where a step argument's value comes from (docs/concepts.md,
"Arguments and wiring").

* ``input("name", path)`` — a reactor input;
* ``result("step", path)`` — another step's result (adds a dependency edge);
* ``value(x)`` — a literal;
* ``element("map_step", path)`` — inside a map step's ``args``: the current element.

``path`` may be a dotted string (``"payment.token"``), a list of keys (``["lines", 0]``) or
``None``. Each segment is read as a mapping key, then as an attribute, then as a sequence index.
A ``transform`` callable, if given, is applied to the resolved value. Resolution itself lives in
:mod:`reactor.engine.arguments`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ElementRef",
    "InputRef",
    "ResultRef",
    "Template",
    "ValueRef",
    "element",
    "input",
    "normalise_path",
    "result",
    "value",
]

PathLike = str | int | Sequence[str | int] | None


def normalise_path(path: PathLike) -> tuple[str | int, ...]:
    """Turn a path spelling into a tuple of segments.

    Args:
        path: ``None``, ``"a.b"``, an int index, or a sequence of keys/indexes.

    Returns:
        The segments, e.g. ``("a", "b")``.

    Raises:
        TypeError: a segment is neither ``str`` nor ``int``.
    """
    if path is None:
        return ()
    if isinstance(path, str):
        return tuple(p for p in path.split(".") if p)
    if isinstance(path, int):
        return (path,)
    segments = tuple(path)
    for seg in segments:
        if not isinstance(seg, str | int):
            raise TypeError(f"path segments must be str or int, got {seg!r}")
    return segments


@dataclass(frozen=True)
class Template:
    """Base of the argument templates.

    Attributes:
        path: the segments to read inside the referenced value.
        transform: an optional callable applied to the resolved value.
    """

    path: tuple[str | int, ...] = ()
    transform: Callable[[Any], Any] | None = None

    def describe(self) -> str:
        """A short human-readable spelling (used in error messages)."""
        return type(self).__name__


@dataclass(frozen=True)
class InputRef(Template):
    """A reactor input (``input("name", path)``)."""

    name: str = ""

    def describe(self) -> str:
        """See :meth:`Template.describe`."""
        return f"input({self.name!r})"


@dataclass(frozen=True)
class ResultRef(Template):
    """Another step's result (``result("step", path)``); adds a dependency edge."""

    step: str = ""

    def describe(self) -> str:
        """See :meth:`Template.describe`."""
        return f"result({self.step!r})"


@dataclass(frozen=True)
class ValueRef(Template):
    """A literal value (``value(x)``)."""

    value: Any = None

    def describe(self) -> str:
        """See :meth:`Template.describe`."""
        return f"value({self.value!r})"


@dataclass(frozen=True)
class ElementRef(Template):
    """The current element of map step ``map_step`` (``element("map_step", path)``)."""

    map_step: str = ""

    def describe(self) -> str:
        """See :meth:`Template.describe`."""
        return f"element({self.map_step!r})"


def input(  # noqa: A001 - the public DSL spelling
    name: str, path: PathLike = None, *, transform: Callable[[Any], Any] | None = None
) -> InputRef:
    """Reference the reactor input ``name`` (optionally a path inside it).

    Args:
        name: a declared reactor input.
        path: ``"a.b"``, ``["a", "b"]`` or ``None``.
        transform: optional callable applied to the resolved value.

    Returns:
        An :class:`InputRef`.
    """
    return InputRef(path=normalise_path(path), transform=transform, name=name)


def result(
    step: str, path: PathLike = None, *, transform: Callable[[Any], Any] | None = None
) -> ResultRef:
    """Reference the result of step ``step`` (optionally a path inside it); adds a DAG edge.

    Args:
        step: a step of the same reactor.
        path: ``"a.b"``, ``["a", "b"]`` or ``None``.
        transform: optional callable applied to the resolved value.

    Returns:
        A :class:`ResultRef`.
    """
    return ResultRef(path=normalise_path(path), transform=transform, step=step)


def value(literal: Any) -> ValueRef:
    """A literal argument value.

    Args:
        literal: any value (passed as is, never copied).

    Returns:
        A :class:`ValueRef`.
    """
    return ValueRef(value=literal)


def element(
    map_step: str, path: PathLike = None, *, transform: Callable[[Any], Any] | None = None
) -> ElementRef:
    """Reference the current element of map step ``map_step`` (only inside its ``args``).

    Args:
        map_step: the name of the map step whose ``args`` use this template.
        path: ``"a.b"``, ``["a", "b"]`` or ``None``.
        transform: optional callable applied to the resolved value.

    Returns:
        An :class:`ElementRef`.
    """
    return ElementRef(path=normalise_path(path), transform=transform, map_step=map_step)
