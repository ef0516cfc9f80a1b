"""Which received jobs a worker with async slots runs in a slot (docs/workers.md, "Async
slots", "What goes to a slot").

A slot suspends a job where it would block its thread for an ``async def`` body
(:mod:`reactor.engine.handback`); it pays off only for a job that spends its time awaiting, and
every synchronous stretch of a hosted job takes its turn on the host's one thread. So a job
goes to a slot when what it runs is async through and through:

* a ``step`` job whose unit body is ``async def`` (an ``async_step``);
* a ``run`` job of an **async reactor**: every leaf step's ``run`` is ``async def`` (through
  composed children and inline maps' element reactors), none is transactional (a step
  transaction is bound to its thread, which a suspended run would share), and the reactor runs
  one step at a time (``max_concurrency == 1``: parallel branches wait on threads of their
  own). ``async_step``, ``async_reactor``, fan-out maps, interrupts and sleeps are their own
  jobs or parks, so they never hold the run's thread. A plain ``undo`` or ``compensate`` is
  allowed: it runs on the host's thread in its turn, like a storage call.

Anything else runs on a handler thread, as without slots.
"""

from __future__ import annotations

import inspect

from reactor import registry
from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.errors import DeserializationError, UnknownReactorError
from reactor.ports.payloads import RunPayload, StepPayload, parse_payload
from reactor.ports.router import Job

__all__ = ["awaits_on_loop", "runs_on_loop"]


def _async_run(spec: StepSpec) -> bool:
    """Whether leaf ``spec``'s ``run`` body is ``async def``."""
    if spec.step_class is not None:
        return inspect.iscoroutinefunction(spec.step_class.run)
    return spec.function is not None and inspect.iscoroutinefunction(spec.function)


def _async_unit(spec: StepSpec) -> bool:
    """Whether ``spec`` is an ``async_step`` whose body is ``async def``."""
    return spec.kind == "async_step" and _async_run(spec)


def runs_on_loop(definition: ReactorDefinition) -> bool:
    """Whether ``definition`` is an async reactor, whose ``run`` jobs go to a slot (see the
    module docstring).

    Args:
        definition: the reactor's definition.

    Returns:
        ``True`` when every leaf step's body is ``async def`` and not transactional, through
        composed children and inline maps, and the reactor runs one step at a time.
    """
    if definition.max_concurrency != 1:
        return False
    for name, spec in definition.steps.items():
        if spec.kind == "step":
            if spec.transaction or not _async_run(spec):
                return False
        elif spec.kind == "compose" or (spec.kind == "map" and spec.fan_out is None):
            child = definition.children.get(name)
            if child is None or not runs_on_loop(child):
                return False
    return True


def awaits_on_loop(job: Job) -> bool:
    """Whether a worker with async slots runs ``job`` in a slot (docs/workers.md, "Async
    slots"): a ``step`` job whose unit body is ``async def``, or a ``run`` job of an async
    reactor (:func:`runs_on_loop`).

    A ``step`` job's unit is looked up on the root's registered reactor, or, for a unit of a
    composed child, on every registered reactor declaring an ``async_step`` of that name (all
    must be ``async def``). Anything else — another kind, a plain body, a payload or reactor
    a handler would refuse — is ``False``: it runs on a handler thread as always.

    Args:
        job: the received job.

    Returns:
        Whether to run it in a slot.
    """
    if job.kind not in ("step", "run"):
        return False
    try:
        payload = parse_payload(job)
        if isinstance(payload, RunPayload):
            return runs_on_loop(registry.get(payload.reactor).definition)
        if not isinstance(payload, StepPayload):
            return False
        root = registry.get(payload.reactor).definition
        if payload.step_context_id == payload.root_context_id:
            found = [root.steps[payload.step_name]] if payload.step_name in root.steps else []
        else:
            found = [
                spec for name in registry.names()
                if (spec := registry.get(name).definition.steps.get(payload.step_name))
                is not None and spec.kind == "async_step"
            ]
    except (DeserializationError, UnknownReactorError):
        return False
    return bool(found) and all(_async_unit(spec) for spec in found)
