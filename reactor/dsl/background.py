"""``Background``: moving a run (or the rest of it) to a worker (docs/workers.md,
"Background runs").

Declared as the ``background`` class attribute of a ``Reactor``, in exactly one mode::

    class CreateUser(Reactor):
        ...
        background = Background(after="create_user")   # or before="open_account", or all=True

* ``all=True`` — the whole run, input validation included, runs in a worker; the caller only
  persists the run and enqueues it.
* ``after="x"`` — the caller runs steps until ``x`` has completed (or was skipped), then hands
  off; a ``Halt`` at or before ``x`` never hands off.
* ``before="x"`` — the caller hands off instead of running ``x`` (the trigger is *reaching*
  ``x``: the moment it is ready to run).

On a hand-off the context (with its undo stack) is saved **before** the ``run`` job is
enqueued, and the caller receives a :class:`reactor.engine.dispatch.DispatchHandle`. Inside the
worker the hand-off never re-triggers, and a failure there also undoes the steps that ran in the
caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from reactor.errors import DefinitionError

__all__ = ["Background", "BackgroundMode"]

BackgroundMode = Literal["all", "after", "before"]


@dataclass(frozen=True, init=False)
class Background:
    """Where a reactor's run moves to a background worker: exactly one of the three modes.

    Args:
        all: ``True`` to run the whole run (input validation included) in a worker.
        after: the step after which the caller hands off.
        before: the step the caller hands off instead of running.

    Raises:
        DefinitionError: no mode or more than one mode, ``all`` not a ``bool``, or a step name
            that is not a non-empty string. Whether the step exists is checked when the reactor
            class is created (:func:`reactor.dsl.definition.attach_background`).
    """

    mode: BackgroundMode
    step: str | None

    def __init__(
        self,
        *,
        all: bool = False,  # noqa: A002 - the DSL's own spelling
        after: str | None = None,
        before: str | None = None,
    ) -> None:
        if not isinstance(all, bool):
            raise DefinitionError(f"Background(all=...) must be a bool, got {all!r}")
        chosen = [name for name, on in (("all", all), ("after", after is not None),
                                        ("before", before is not None)) if on]
        if len(chosen) != 1:
            given = f"all={all!r}, after={after!r}, before={before!r}"
            raise DefinitionError(
                "Background(...) takes exactly one of all=True, after='step' or before='step'"
                + (f" (got {' and '.join(chosen)}: {given})" if chosen else f" (got none: {given})")
            )
        step = after if after is not None else before
        if step is not None and (not isinstance(step, str) or not step):
            raise DefinitionError(f"Background step must be a step name, got {step!r}")
        mode: BackgroundMode = "all" if all else ("after" if after is not None else "before")
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "step", step)

    def __repr__(self) -> str:
        if self.mode == "all":
            return "Background(all=True)"
        return f"Background({self.mode}={self.step!r})"
