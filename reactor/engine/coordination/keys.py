"""The keys and owners of a unit's holds: the reactor-level scope, a step's default key and
the lock owner of a run (docs/coordination.md, "Declaring", "Order").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reactor.dsl.declarations import StepSpec
    from reactor.dsl.step import BaseStep
    from reactor.model.context import Context


#: The ``EngineState.parked_holds`` (and ``Waiting.scope``) scope of reactor-level holds.
REACTOR_SCOPE = "@reactor"


def root_id(ctx: Context) -> str:
    """The lock owner of a run: its root context id (the run itself when it is the root), so
    a run re-enters its own locks across its compose tree (docs/coordination.md, "Declaring")."""
    return ctx.root_context_id or ctx.context_id


def step_default_key(definition_name: str, spec: StepSpec) -> str:
    """The key of a step-level declaration without ``key``.

    A class step uses its Step class's ``module.QualName`` (shared with a direct ``Step.call``
    of that class); a function step uses ``"<reactor name>.<step name>"``.
    """
    if spec.step_class is not None:
        return class_key(spec.step_class)
    return f"{definition_name}.{spec.name}"


def class_key(cls: type[BaseStep]) -> str:
    """The default key of a Step class's declarations: its ``module.QualName``."""
    return f"{cls.__module__}.{cls.__qualname__}"
