"""``python -m reactor_contract.obligations``: print docs/obligations.md (generated from the
catalogue; docs/contract-suite.md, "The obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import markdown

print(markdown(), end="")
