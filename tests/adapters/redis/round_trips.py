"""A client-side round-trip counter for the Redis adapter tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from redis.connection import AbstractConnection


class RoundTrips:
    """Counts requests written by any redis-py connection (one send = one round trip, a
    pipeline included), as benchmarks/_roundtrips.py does."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original: Callable[..., None] = AbstractConnection.send_packed_command

        def send(conn: AbstractConnection, command: Any, check_health: bool = True) -> None:
            self.count += 1
            original(conn, command, check_health)

        monkeypatch.setattr(AbstractConnection, "send_packed_command", send)

    def of(self, call: Callable[[], Any]) -> int:
        """The round trips ``call()`` makes."""
        before = self.count
        call()
        return self.count - before
