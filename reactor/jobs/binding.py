"""How a configured runtime is connected to the job layer (docs/architecture.md, "Layers").

:func:`reactor.config.configure` builds a storage, a router and settings and knows nothing of
jobs; the facade installs :func:`bind_runtime` as its binder so that every runtime it builds
can run jobs: an ``inline://`` router runs each job through the worker's handlers in the
enqueuing thread, and a ``local://`` router built from a URL gets its embedded workers
(docs/workers.md, "Running workers").
"""

from __future__ import annotations

from reactor.config import Runtime
from reactor.jobs.embedded import bind_local_workers
from reactor.jobs.handlers import bind_inline

__all__ = ["bind_runtime"]


def bind_runtime(runtime: Runtime, router_built_from_url: bool) -> None:
    """Connect ``runtime``'s router to the job handlers.

    Args:
        runtime: the runtime :func:`reactor.config.configure` just built.
        router_built_from_url: the router came from a URL (only then does a ``local://``
            router get embedded workers: a router object passed in is the caller's to drive).
    """
    bind_inline(runtime)
    if router_built_from_url:
        bind_local_workers(runtime)
