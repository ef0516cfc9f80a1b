"""Argument resolution: turning a step's templates into values (docs/concepts.md,
"Arguments and wiring").

``input(...)`` reads the run's inputs, ``result(...)`` a completed step's value (``Skipped``
values included; for an ``async_step`` unit the reader waits for the unit's record, see
:mod:`reactor.engine.async_step`), ``value(...)`` is a literal, ``element(...)`` the current
map element. A path segment is read as a mapping key, then an attribute, then a sequence
index. ``False``, ``0`` and ``""`` resolve as themselves. Any problem — a missing key, a
raising ``transform`` — raises :class:`~reactor.errors.ArgumentResolutionError`: the
step's body never starts, so it is not compensated and not retried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reactor.dsl.declarations import StepSpec
from reactor.dsl.templates import ElementRef, InputRef, ResultRef, Template, ValueRef
from reactor.engine.async_step import read_result
from reactor.errors import ArgumentResolutionError
from reactor.model.context import Context

__all__ = ["NO_ELEMENT", "read_path", "resolve", "resolve_arguments"]


class _NoElement:
    def __repr__(self) -> str:
        return "NO_ELEMENT"


#: Sentinel: no map element is bound.
NO_ELEMENT: Any = _NoElement()


def read_path(value: Any, path: Sequence[str | int]) -> Any:
    """Read ``path`` inside ``value``.

    Args:
        value: the root value.
        path: segments; each is tried as a mapping key, then an attribute (``str`` segments),
            then a sequence index (``int`` segments or digit strings).

    Returns:
        The value found.

    Raises:
        LookupError: a segment is absent (the message names the path so far).
    """
    current = value
    walked: list[str] = []
    for seg in path:
        walked.append(str(seg))
        if isinstance(current, Mapping):
            if seg in current:
                current = current[seg]
                continue
            if isinstance(seg, str) and seg.isdigit() and int(seg) in current:
                current = current[int(seg)]
                continue
        if isinstance(seg, str) and not seg.startswith("_") and hasattr(current, seg):
            current = getattr(current, seg)
            continue
        index = seg if isinstance(seg, int) else (int(seg) if seg.isdigit() else None)
        if (
            index is not None
            and isinstance(current, Sequence)
            and not isinstance(current, str | bytes)
            and -len(current) <= index < len(current)
        ):
            current = current[index]
            continue
        raise LookupError(f"path {'.'.join(walked)!r} not found")
    return current


def resolve(template: Template, ctx: Context, element: Any = NO_ELEMENT) -> Any:
    """Resolve one template against a context.

    Raises:
        ArgumentResolutionError: the referenced value or path is missing, or the transform
            raised (chained as ``__cause__``).
    """
    try:
        if isinstance(template, InputRef):
            if template.name not in ctx.inputs:
                raise LookupError(f"input {template.name!r} is not set")
            base = ctx.inputs[template.name]
        elif isinstance(template, ResultRef):
            if template.step in ctx.intermediate_results:
                base = ctx.intermediate_results[template.step]
            else:  # an async unit: wait for it (reactor.engine.async_step), else LookupError
                base = read_result(ctx, template.step)
        elif isinstance(template, ValueRef):
            base = template.value
        elif isinstance(template, ElementRef):
            if element is NO_ELEMENT:
                raise LookupError(f"no element of map {template.map_step!r} is bound")
            base = element
        else:
            raise LookupError(f"unknown template {template!r}")
        resolved = read_path(base, template.path)
        if template.transform is not None:
            resolved = template.transform(resolved)
        return resolved
    except Exception as exc:
        raise ArgumentResolutionError(
            f"cannot resolve {template.describe()}"
            + (f" path {'.'.join(map(str, template.path))!r}" if template.path else "")
            + f": {exc}"
        ) from exc


def resolve_arguments(
    spec: StepSpec, ctx: Context, element: Any = NO_ELEMENT
) -> dict[str, Any]:
    """Resolve every argument of ``spec`` (not a map's ``source``).

    Raises:
        ArgumentResolutionError: see :func:`resolve`; the message names the argument.
    """
    out: dict[str, Any] = {}
    for name, template in spec.arguments.items():
        try:
            out[name] = resolve(template, ctx, element)
        except ArgumentResolutionError as exc:
            raise ArgumentResolutionError(f"step {spec.name!r} argument {name!r}: {exc}") from (
                exc.__cause__ or exc
            )
    return out
