"""What a soak worker imports: ``reactor worker --import examples.order_fulfilment.soak_worker``.

Registers the worker saga (:class:`~.saga_workers.FulfilInWorkers` and its map element
reactor) and, when ``ORDER_FULFILMENT_JOURNAL`` names a journal file, makes this process's
steps use the fake services shared through it (:func:`.shared_services.install_from_environment`).
The chaos soak (:mod:`.soak`, docs/workers.md "Soak") starts its workers this way.
"""

from __future__ import annotations

from .saga_workers import FulfilInWorkers
from .shared_services import install_from_environment

__all__ = ["SHARED", "FulfilInWorkers"]

#: This process's shared services (``None`` without ``ORDER_FULFILMENT_JOURNAL``).
SHARED = install_from_environment()
