"""reactor's adapter contract suite, shipped as an installable pytest plugin.

Run it against any storage and router by URL (docs/contract-suite.md)::

    pytest --pyargs reactor_contract --reactor-storage=URL --reactor-router=URL

Or subclass its contract classes (``reactor_contract.test_locks.LocksContract``, ...) in your own
test suite and provide the ``storage``/``probe`` (``router``/``router_probe``) fixtures.

Public names: the probe protocols (:class:`Probe`, :class:`RouterProbe`, and the optional
:class:`ClockProbe` and :class:`CleanupProbe` capabilities), the generic probe for adapters built on
:class:`reactor.generic.storage.GenericStorage` (:class:`GenericProbe`,
:class:`DocumentBackdoor`), the probe loaders, and :data:`CONCERNS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reactor_contract.probe import (
    CONCERNS,
    FENCE,
    PROBE_GROUP,
    ROUTER_PROBE_GROUP,
    CleanupProbe,
    ClockProbe,
    Probe,
    ProbeNotFound,
    RouterProbe,
    load_probe,
    load_router_probe,
)

__all__ = [
    "CONCERNS",
    "FENCE",
    "PROBE_GROUP",
    "ROUTER_PROBE_GROUP",
    "CleanupProbe",
    "ClockProbe",
    "DocumentBackdoor",
    "GenericProbe",
    "Probe",
    "ProbeNotFound",
    "RouterProbe",
    "load_probe",
    "load_router_probe",
]

if TYPE_CHECKING:
    from reactor_contract.generic_probe import DocumentBackdoor, GenericProbe


def __getattr__(name: str) -> object:
    # GenericProbe imports reactor.generic: loaded on first use, so the pytest plugin (which
    # every pytest run of a project loads) never depends on more than reactor.ports.
    if name in ("GenericProbe", "DocumentBackdoor"):
        from reactor_contract import generic_probe

        return getattr(generic_probe, name)
    raise AttributeError(f"module 'reactor_contract' has no attribute {name!r}")
