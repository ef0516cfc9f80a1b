"""Which definition an operator call uses for a stored run: the current one registered under
the run's reactor name, or a retained old release's whose fingerprint the run was stored with
(docs/deploys.md, "Operator tools").

A release that removed a step a stored run completed cannot undo that run (its undo would be
lost: docs/deploys.md, "Compatibility rules"). Keeping the old release's reactor class in a
module of its own, declared with ``retained=True`` (:mod:`reactor.registry`), lets an operator
import it (``reactor runs undo RUN --import old_module``): undo and cancel of a run whose
stored fingerprint is the retained definition's then run that definition's undos. Workers
never use a retained definition.
"""

from __future__ import annotations

from reactor import registry
from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.fingerprint import definition_id
from reactor.errors import UnknownReactorError
from reactor.model.context import Context

__all__ = ["definition_for", "retained_for"]


def retained_for(ctx: Context) -> ReactorDefinition | None:
    """The retained definition of ``ctx``'s reactor with the run's stored fingerprint.

    Args:
        ctx: a stored run.

    Returns:
        The retained definition, or ``None`` (no stored fingerprint, or none retained for it).
    """
    stamp = ctx.engine_state.definition
    if stamp is None:
        return None
    cls = registry.retained(ctx.reactor, stamp.fingerprint)
    return None if cls is None else cls.definition


def definition_for(ctx: Context) -> ReactorDefinition:
    """The definition an operator's rollback of ``ctx`` uses: the current one when it has the
    run's fingerprint (it is what workers use; a retained class of the same fingerprint is an
    older copy of the same shape, its bodies maybe older too), else the retained one of the
    run's fingerprint when one is imported (:func:`retained_for`), else the current one.

    Args:
        ctx: a stored run.

    Returns:
        The definition.

    Raises:
        UnknownReactorError: neither a retained definition of the run's fingerprint nor a
            current one is registered under its reactor name.
    """
    stamp = ctx.engine_state.definition
    try:
        current: ReactorDefinition | None = registry.get(ctx.reactor).definition
    except UnknownReactorError:
        current = None
    if current is not None and (
        stamp is None or definition_id(current).fingerprint == stamp.fingerprint
    ):
        return current
    found = retained_for(ctx)
    if found is not None:
        return found
    if current is None:
        raise UnknownReactorError(f"no reactor is registered under {ctx.reactor!r}")
    return current
