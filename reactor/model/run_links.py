"""Where run control keeps its bookkeeping in a run (docs/run-control.md).

:class:`RunLinks` is the ``links`` field of the run's typed engine state
(:class:`reactor.model.engine_state.EngineState`). It is stored flat, one key per link, in
the document's ``private_data`` object, so stored runs need no new schema field
(docs/protocol.md, "Contexts"):

==========================  ===============================================================
stored key                  value
==========================  ===============================================================
``idempotency_key``         the caller's idempotency key the run holds (``Reactor.run(...,
                            idempotency_key=...)``), or moved to it by ``Reactor.retry``
``retried_from``            on a retry: the id of the run it retries
``retries``                 on a retried run: the ids of its retries, oldest first
==========================  ===============================================================

:class:`reactor.model.run_view.RunView` shows them as ``idempotency_key``, ``retried_from`` and
``retries``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["RunLinks"]


@dataclass(frozen=True)
class RunLinks:
    """A run's run-control links (docs/run-control.md). Immutable: update with
    :func:`dataclasses.replace` or :meth:`with_retry`.

    Attributes:
        idempotency_key: the idempotency key the run holds, or ``None``.
        retried_from: on a retry, the id of the run it retries; else ``None``.
        retries: on a retried run, the ids of its retries, oldest first.
    """

    idempotency_key: str | None = None
    retried_from: str | None = None
    retries: tuple[str, ...] = ()

    def with_retry(self, run_id: str) -> RunLinks:
        """These links with ``run_id`` appended to :attr:`retries`.

        Args:
            run_id: the id of the new run retrying this one.

        Returns:
            A new value (this one is unchanged).
        """
        return replace(self, retries=(*self.retries, run_id))
