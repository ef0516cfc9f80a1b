"""``async_reactor``: declare a step that runs a child reactor as its own background run
(docs/run-control.md, "async_reactor")::

    class Checkout(Reactor):
        order_id = Input(str)

        reserve = step(Reserve, order_id=input("order_id"))
        ship = async_reactor(Shipping, args={"order_id": input("order_id")},
                             wait_for="reserve")

        @step(shipment=result("ship"))   # waits for the child run's outcome
        def notify(inputs, ctx): ...

The arguments mean what they mean on :func:`reactor.dsl.declarations.compose` (a child input
with no argument takes the parent's input of the same name); the difference is where the child
runs: as its own stored run, in a worker (:mod:`reactor.engine.async_reactor`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from reactor.dsl.declarations import StepSpec, compose
from reactor.errors import DefinitionError

__all__ = ["async_reactor"]


def async_reactor(
    child: Any,
    /,
    *,
    args: Mapping[str, Any] | None = None,
    wait_for: str | Iterable[str] | None = None,
    retries: Any = None,
    **arguments: Any,
) -> StepSpec:
    """Declare an async reactor step: run reactor ``child`` as its own background run.

    Reaching the step stores the child run (``dispatched_child``, its id derived from the
    parent's id and the step name, so a re-executed parent finds it instead of starting a
    second one) and enqueues its ``run`` job; the step's result is the child run's result. A
    failed child rolls itself back before the parent's step fails; a parent that fails after
    the child completed undoes the child's steps as part of its own rollback
    (docs/run-control.md, "async_reactor").

    Args:
        child: a ``Reactor`` subclass.
        args: the child's inputs (templates or literals), as a mapping.
        wait_for: extra dependencies.
        retries: rejected — only leaf steps retry.
        **arguments: more child inputs, as keywords (``compose``'s style).

    Returns:
        A :class:`~reactor.dsl.declarations.StepSpec` of kind ``"async_reactor"``.

    Raises:
        DefinitionError: ``child`` is not a Reactor subclass, ``retries`` was given, or an
            input is given both in ``args`` and as a keyword.
    """
    given = dict(args or {})
    both = sorted(set(given) & set(arguments))
    if both:
        raise DefinitionError(
            f"async_reactor({getattr(child, '__qualname__', child)}): input(s) {both} given "
            "both in args= and as keywords"
        )
    try:
        spec = compose(child, wait_for=wait_for, retries=retries, **given, **arguments)
    except DefinitionError as exc:
        raise DefinitionError(str(exc).replace("compose(", "async_reactor(", 1)) from None
    return replace(spec, kind="async_reactor")
