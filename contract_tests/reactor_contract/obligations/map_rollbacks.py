"""Obligations of the map rollbacks concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

OBLIGATIONS: tuple[Obligation, ...] = ()
