"""A reactor definition's fingerprint: a stable hash of its shape (docs/deploys.md,
"Fingerprints").

The **shape** of a definition is what a stored run depends on to be continued or rolled back:
its steps (names, kinds, whether a leaf step has an undo or a compensate), the edges between
them (``result()`` and ``element()`` wiring, ``wait_for``), the argument wiring (which input,
result or element feeds which argument, and at which path), the ``returns`` step, and for a
compose, map or ``async_reactor`` step the shape of its child reactor. What a step's body does,
its retries, time limits and coordination are *not* part of it: a change there is a code change
that a stored run may continue under (docs/deploys.md, "Compatibility rules").

The fingerprint is the first 16 hex digits of the SHA-256 of the shape's canonical JSON; it
does not depend on the Python version, the process or the order steps were declared in beyond
what the definition itself orders. A user may also label a reactor with ``version = "..."``
(kept beside the fingerprint, never part of it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reactor.dsl.templates import ElementRef, InputRef, ResultRef, Template, ValueRef
from reactor.model.engine_state import DefinitionStamp

if TYPE_CHECKING:
    from reactor.dsl.declarations import StepSpec
    from reactor.dsl.definition import ReactorDefinition

__all__ = [
    "FINGERPRINT_DIGITS",
    "STEP_DIGEST_DIGITS",
    "definition_id",
    "fingerprint",
    "shape",
    "step_digest",
    "step_digests",
    "step_shape",
]

#: Hex digits kept of the SHA-256 (64 bits: a collision between two shapes of one reactor is
#: not a practical concern).
FINGERPRINT_DIGITS = 16

#: Hex digits kept of one step's shape digest (docs/deploys.md, "Compatibility rules"): small
#: enough to store one per step in every run; a step's shape is only ever compared with the
#: same step's other shape, so 32 bits suffice.
STEP_DIGEST_DIGITS = 8


def definition_id(definition: ReactorDefinition) -> DefinitionStamp:
    """The :class:`~reactor.model.engine_state.DefinitionStamp` of ``definition``: what a run
    started under it stores (cached per definition object).

    Args:
        definition: a bound reactor definition.

    Returns:
        Its fingerprint, version label and per-step digests (:func:`step_digests`).
    """
    cached = _CACHE.get(id(definition))
    if cached is not None and cached[0] is definition:
        return cached[1]
    made = DefinitionStamp(
        fingerprint(definition), definition.version, step_digests(definition)
    )
    _CACHE[id(definition)] = (definition, made)
    return made


#: id(definition) -> (definition, its id): definitions are immutable and live as long as their
#: reactor class, so the cache holds one entry per reactor (and per rebinding of one).
_CACHE: dict[int, tuple[ReactorDefinition, DefinitionStamp]] = {}


def fingerprint(definition: ReactorDefinition) -> str:
    """The fingerprint of ``definition``'s shape: 16 hex digits of the SHA-256 of
    :func:`shape` as canonical JSON (sorted keys, no spaces).

    Args:
        definition: a bound reactor definition.

    Returns:
        The fingerprint, e.g. ``"3f9a0c1d2b4e5f60"``.
    """
    text = json.dumps(shape(definition), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:FINGERPRINT_DIGITS]


def step_digests(definition: ReactorDefinition) -> dict[str, str]:
    """Every declared step's shape digest: the first 8 hex digits of the SHA-256 of
    :func:`step_shape` as canonical JSON. A stored run keeps them so that a later process can
    tell which of its steps changed shape (docs/deploys.md, "Compatibility rules").

    Args:
        definition: a bound reactor definition.

    Returns:
        Step name -> digest, in definition order.
    """
    return {
        name: step_digest(step_shape(spec, definition.children))
        for name, spec in definition.steps.items()
    }


def step_digest(step: Mapping[str, Any]) -> str:
    """The digest of one step's shape (docs/deploys.md, "Compatibility rules").

    Args:
        step: a :func:`step_shape` value.

    Returns:
        The first 8 hex digits of the SHA-256 of its canonical JSON.
    """
    text = json.dumps(step, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:STEP_DIGEST_DIGITS]


def shape(definition: ReactorDefinition) -> dict[str, Any]:
    """The shape of ``definition`` as a JSON-native dict (see the module docstring).

    Args:
        definition: a bound reactor definition.

    Returns:
        ``{"name", "steps": [[name, step shape], ...] in definition order, "returns"}``.
    """
    return {
        "name": definition.name,
        "steps": [
            [name, step_shape(spec, definition.children)]
            for name, spec in definition.steps.items()
        ],
        "returns": definition.returns,
    }


def step_shape(
    spec: StepSpec, children: Mapping[str, ReactorDefinition] | None = None
) -> dict[str, Any]:
    """The shape of one declared step (part of :func:`shape`).

    Args:
        spec: the bound step.
        children: the definition's children (compose, map and ``async_reactor`` steps' child
            definitions by step name).

    Returns:
        ``{"kind", "args", "wait_for", ...}``: ``undo``/``compensate`` for leaf steps,
        ``child`` (the child's fingerprint) for compose, map and ``async_reactor`` steps,
        ``source``, ``atomic`` and ``fan_out`` for maps.
    """
    out: dict[str, Any] = {
        "kind": spec.kind,
        "args": {name: _template(t) for name, t in sorted(spec.arguments.items())},
        "wait_for": sorted(spec.wait_for),
    }
    if spec.kind in ("step", "async_step"):
        out["undo"] = _has_undo(spec)
        out["compensate"] = _has_compensate(spec)
    child = None if children is None else children.get(spec.name)
    if child is None and spec.target is not None:
        child = getattr(spec.target, "definition", None)  # a Reactor class
    if child is not None:
        out["child"] = fingerprint(child)
    elif spec.target is not None:
        out["child"] = getattr(spec.target, "__qualname__", type(spec.target).__name__)
    if spec.kind == "map":
        out["source"] = None if spec.source is None else _template(spec.source)
        out["atomic"] = spec.atomic
        out["fan_out"] = spec.fan_out is not None
    return out


def _template(template: Template) -> list[Any]:
    """A template's wiring: what it reads and where, whether it transforms (a transform's
    code is a code change, its presence is wiring)."""
    path = list(template.path)
    transformed = template.transform is not None
    if isinstance(template, InputRef):
        return ["input", template.name, path, transformed]
    if isinstance(template, ResultRef):
        return ["result", template.step, path, transformed]
    if isinstance(template, ElementRef):
        return ["element", template.map_step, path, transformed]
    if isinstance(template, ValueRef):
        return ["value", type(template.value).__qualname__]
    return [type(template).__name__, path, transformed]


def _has_undo(spec: StepSpec) -> bool:
    if spec.step_class is not None:
        return bool(spec.step_class.has_undo())
    return spec.undo_function is not None


def _has_compensate(spec: StepSpec) -> bool:
    if spec.step_class is not None:
        return bool(spec.step_class.has_compensate())
    return spec.compensate_function is not None
