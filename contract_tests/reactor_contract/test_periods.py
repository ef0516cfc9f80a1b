"""Periods, mark-if-absent (docs/protocol.md#periods): first wins on every backend."""

from __future__ import annotations

import math

from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, assert_ttl, uid
from reactor_contract.probe import Probe

__all__ = ["PeriodsContract"]


class PeriodsContract:
    """:class:`reactor.ports.PeriodStore` behaviour every adapter must show."""

    reactor_concern = "periods"

    def test_mark_if_absent_first_wins(self, storage: Storage) -> None:
        key = uid("period")
        assert storage.periods.marker(key) is None
        before = storage.now()
        assert storage.periods.mark(key, ttl=HOUR, context_id="ctx-a") is True
        assert storage.periods.mark(key, ttl=HOUR, context_id="ctx-b") is False
        marker = storage.periods.marker(key)
        assert marker is not None and marker.context_id == "ctx-a"
        assert before - 1 <= marker.marked_at <= storage.now() + 1

    def test_a_marker_without_a_context(self, storage: Storage) -> None:
        key = uid("period")
        assert storage.periods.mark(key, ttl=HOUR) is True
        marker = storage.periods.marker(key)
        assert marker is not None and marker.context_id is None
        assert storage.periods.mark(key, ttl=HOUR, context_id="ctx-a") is False

    def test_marker_ttl(self, storage: Storage, probe: Probe) -> None:
        key = uid("period")
        storage.periods.mark(key, ttl=HOUR)
        assert_ttl(probe.ttl("period", key), HOUR)

    def test_ttl_none_never_expires(self, storage: Storage, probe: Probe) -> None:
        key = uid("period")
        storage.periods.mark(key, ttl=None, context_id="ctx-a")
        assert probe.ttl("period", key) == math.inf

    def test_a_losing_mark_does_not_restamp(self, storage: Storage, probe: Probe) -> None:
        key = uid("period")
        storage.periods.mark(key, ttl=120)
        storage.periods.mark(key, ttl=HOUR)
        assert_ttl(probe.ttl("period", key), 120)

    def test_an_expired_marker_can_be_marked_again(self, storage: Storage, probe: Probe) -> None:
        key = uid("period")
        storage.periods.mark(key, ttl=HOUR, context_id="ctx-a")
        probe.expire("period", key)
        assert storage.periods.marker(key) is None
        assert storage.periods.mark(key, ttl=HOUR, context_id="ctx-b") is True
        marker = storage.periods.marker(key)
        assert marker is not None and marker.context_id == "ctx-b"


class TestPeriods(PeriodsContract):
    """The periods contract against ``--reactor-storage``."""
