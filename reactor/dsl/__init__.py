"""The declaration language: ``BaseReactor``, ``BaseStep``, ``Input``, ``Retries``, step
declarations and argument templates (docs/architecture.md, "Layers").

Users subclass :class:`reactor.Reactor` and :class:`reactor.Step` (the facade), which extend
the two base classes here with what needs the engine; nothing in this package imports it.
"""

from __future__ import annotations

from reactor.dsl.async_reactor import async_reactor
from reactor.dsl.async_step import async_step
from reactor.dsl.coordination import (
    with_lock,
    with_ordered_lock,
    with_period,
    with_rate_limit,
    with_semaphore,
)
from reactor.dsl.declarations import StepSpec, compose, interrupt, map_step, sleep, step
from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.fan_out import FanOut
from reactor.dsl.inputs import Input, Inputs
from reactor.dsl.reactor import BaseReactor
from reactor.dsl.retries import Retries
from reactor.dsl.step import BaseStep
from reactor.dsl.templates import element, input, result, value
from reactor.dsl.timeouts import Timeouts

__all__ = [
    "BaseReactor",
    "BaseStep",
    "FanOut",
    "Input",
    "Inputs",
    "ReactorDefinition",
    "Retries",
    "StepSpec",
    "Timeouts",
    "async_reactor",
    "async_step",
    "compose",
    "element",
    "input",
    "interrupt",
    "map_step",
    "result",
    "sleep",
    "step",
    "value",
    "with_lock",
    "with_ordered_lock",
    "with_period",
    "with_rate_limit",
    "with_semaphore",
]
