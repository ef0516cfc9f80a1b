"""The backend-neutral engine: executor, step runner, retries, rollback, compose, inline map,
argument resolution, checkpoints (docs/architecture.md, "Layers").

The engine reaches storage only through :func:`reactor.config.current` (or an explicit
``Runtime``) and the :mod:`reactor.ports` protocols. Every wait (retries, coordination,
readers) goes through the runtime's clock (:attr:`reactor.config.Runtime.clock`;
docs/testing.md, "The clock").

The names below are the engine's surface for the tools above it that read stored runs without
running them (the dashboard, whose import-linter contract forbids it every engine module):
decoding a stored record (:func:`decode_context` with :func:`make_env`), resolving a step's
arguments (:func:`resolve_arguments`) and naming the coordination scope and default key of a
declaration (:data:`REACTOR_SCOPE`, :func:`step_default_key`; docs/dashboard.md). The job
layer, part of the execution, imports the engine's modules themselves.
"""

from __future__ import annotations

from reactor.engine.arguments import resolve_arguments
from reactor.engine.checkpoint import decode_context
from reactor.engine.coordination import REACTOR_SCOPE, step_default_key
from reactor.engine.env import make_env

__all__ = [
    "REACTOR_SCOPE",
    "decode_context",
    "make_env",
    "resolve_arguments",
    "step_default_key",
]
