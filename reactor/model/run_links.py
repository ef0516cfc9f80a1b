"""Where run control keeps its bookkeeping in a stored run (docs/run-control.md).

Each is a key of the context's ``private_data``, so stored runs need no new schema field:

==========================  ===============================================================
key                         value
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

from collections.abc import Mapping
from typing import Any

__all__ = ["IDEMPOTENCY_KEY", "RETRIED_FROM", "RETRIES", "retries_of"]

#: ``private_data`` key: the idempotency key the run holds.
IDEMPOTENCY_KEY = "idempotency_key"
#: ``private_data`` key: the run this run retries.
RETRIED_FROM = "retried_from"
#: ``private_data`` key: the runs retrying this one, oldest first.
RETRIES = "retries"


def retries_of(private_data: Mapping[str, Any]) -> list[str]:
    """The retry run ids recorded in a context's ``private_data`` (``[]`` when none, or when
    the stored value is malformed).

    Args:
        private_data: a context's ``private_data``.

    Returns:
        The run ids, oldest first.
    """
    value = private_data.get(RETRIES)
    if not isinstance(value, list):
        return []
    return [str(v) for v in value if isinstance(v, str)]
