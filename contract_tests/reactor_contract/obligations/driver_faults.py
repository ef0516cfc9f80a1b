"""Obligations under faults injected at the driver (docs/obligations.md; docs/contract-suite.md,
"The obligation catalogue" and "Faults injected at the driver")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

OBLIGATIONS: tuple[Obligation, ...] = ()
