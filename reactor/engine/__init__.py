"""The backend-neutral engine: executor, step runner, retries, rollback, compose, inline map,
argument resolution, checkpoints (docs/architecture.md, "Layers").

The engine reaches storage only through :func:`reactor.config.current` (or an explicit
``Runtime``) and the :mod:`reactor.ports` protocols. Retry waits go through
:data:`reactor.engine.retries.sleep`.
"""

from __future__ import annotations
