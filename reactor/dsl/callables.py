"""Checking, when a class is declared, that the engine can call a step's code the way it will.

The engine calls a ``Step`` subclass as ``cls(inputs, context)`` (``result=`` added for
``undo``, ``failure=`` for ``compensate``) and then ``instance.run()``, ``instance.undo()`` or
``instance.compensate()`` with no argument; a function step as ``run(inputs, ctx)``,
``undo(result, inputs, ctx)`` and ``compensate(error, inputs, ctx)``
(:mod:`reactor.engine.invoke`). A signature that cannot take such a call would only fail when
the step runs — possibly in the middle of a rollback — so it is a
:class:`~reactor.errors.DefinitionError` when the class is created instead (docs/concepts.md,
"Definition errors").
"""

from __future__ import annotations

import inspect
from typing import Any

from reactor.errors import DefinitionError

__all__ = ["check_function_hook", "check_step_class"]

#: How the engine calls each hook of a function step: the positional arguments it passes.
FUNCTION_HOOK_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "run": ("inputs", "ctx"),
    "undo": ("result", "inputs", "ctx"),
    "compensate": ("error", "inputs", "ctx"),
}


def _signature(target: Any) -> inspect.Signature | None:
    """``target``'s signature, or ``None`` when Python cannot tell it (some built-ins)."""
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


def _bind(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """Why ``target(*args, **kwargs)`` cannot bind, or ``None`` when it can (or is unknown)."""
    signature = _signature(target)
    if signature is None:
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        return f"{exc} (its signature is {signature})"
    return None


def check_function_hook(fn: Any, hook: str, label: str) -> None:
    """Refuse a function step's ``run``/``undo``/``compensate`` that cannot take the engine's
    call.

    Args:
        fn: the function (or other callable).
        hook: ``"run"``, ``"undo"`` or ``"compensate"``.
        label: how the message names the step (e.g. ``"step 'charge'"``).

    Raises:
        DefinitionError: ``fn`` is not callable, or cannot be called with the hook's
            positional arguments (:data:`FUNCTION_HOOK_ARGUMENTS`); the message names the hook,
            the expected call and the reason.
    """
    names = FUNCTION_HOOK_ARGUMENTS[hook]
    expected = f"{hook}({', '.join(names)})"
    if not callable(fn):
        raise DefinitionError(f"{label}: {hook} must be a function called as {expected}, "
                              f"got {fn!r}")
    problem = _bind(fn, names, {})
    if problem is not None:
        raise DefinitionError(f"{label}: the engine calls its {hook} as {expected}: {problem}")


def _method_call(cls: type[Any], hook: str) -> tuple[Any, tuple[Any, ...]] | None:
    """What ``instance.<hook>()`` calls, and the positional arguments Python adds to it; ``None``
    for a descriptor whose call cannot be known without an instance (a property...)."""
    raw = inspect.getattr_static(cls, hook)
    if isinstance(raw, staticmethod):
        return raw.__func__, ()
    if isinstance(raw, classmethod):
        return raw.__func__, (cls,)
    if inspect.isfunction(raw):
        return raw, (object(),)  # the instance, bound as the first argument
    if hasattr(type(raw), "__get__"):
        return None
    return raw, ()


def check_step_class(cls: type[Any], hooks: tuple[str, ...]) -> None:
    """Refuse a ``Step`` subclass the engine cannot build or whose hooks it cannot call.

    The engine builds ``cls(inputs, context)``, ``cls(inputs, context, result=...)`` and
    ``cls(inputs, context, failure=...)`` and calls each of ``hooks`` with no argument.

    Args:
        cls: the ``Step`` subclass being created.
        hooks: the method names the engine calls (``"run"``, ``"undo"``, ``"compensate"``).

    Raises:
        DefinitionError: a hook is not callable or needs arguments, or the constructor cannot
            take the engine's arguments; the message names the class, the method and why.
    """
    owner = cls.__qualname__
    for hook in hooks:
        call = _method_call(cls, hook)
        if call is None:
            continue
        target, bound = call
        if not callable(target):
            raise DefinitionError(
                f"{owner}.{hook} must be a method the engine calls as {hook}(), got {target!r}"
            )
        problem = _bind(target, bound, {})
        if problem is not None:
            raise DefinitionError(
                f"{owner}.{hook}: the engine calls it with no argument (self.{hook}()); read "
                f"the step's values from self.inputs, self.result, self.error: {problem}"
            )
    for extra in ({}, {"result": None}, {"failure": None}):
        problem = _bind(cls, (None, None), extra)
        if problem is not None:
            shown = ", ".join(["inputs", "context", *(f"{k}=..." for k in extra)])
            raise DefinitionError(
                f"{owner}.__init__: the engine builds the step as {cls.__name__}({shown}): "
                f"{problem}"
            )
