"""The compare-and-set building blocks of the durable generic stores
(reactor/generic/_durable.py)."""

from __future__ import annotations

import pytest

from reactor.errors import StorageError
from reactor.generic._durable import require_after


def test_a_scan_key_not_strictly_after_its_cursor_is_refused() -> None:
    """Keyset paging needs every returned key strictly greater than ``after``: a key equal to
    it or before it (a store whose ``after`` is broken or goes backwards) is an error naming
    both, and a key after it, or any key of a first page, is accepted."""
    require_after("c", None, "a")
    require_after("c", "a", "b")
    for key in ("b", "a", ""):
        with pytest.raises(StorageError, match=f"returned key {key!r} for after='b'"):
            require_after("c", "b", key)
