"""The backend-neutral engine: executor, step runner, retries, rollback, compose, inline map,
argument resolution, checkpoints (docs/architecture.md, "Layers").

The engine reaches storage only through :func:`reactor.config.current` (or an explicit
``Runtime``) and the :mod:`reactor.ports` protocols. Every wait (retries, coordination,
readers) goes through the runtime's clock (:attr:`reactor.config.Runtime.clock`;
docs/testing.md, "The clock").
"""

from __future__ import annotations
