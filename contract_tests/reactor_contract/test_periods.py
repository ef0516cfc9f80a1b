"""Periods, mark-if-absent (docs/protocol.md#periods): first wins on every backend."""

from __future__ import annotations

import math

import pytest

from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, assert_ttl, teach, uid
from reactor_contract.probe import Probe

__all__ = ["PeriodsContract"]


class PeriodsContract:
    """:class:`reactor.ports.PeriodStore` behaviour every adapter must show."""

    reactor_concern = "periods"

    @pytest.mark.obligations("O-periods-1", "O-periods-2", "O-periods-3")
    def test_mark_if_absent_first_wins(self, storage: Storage) -> None:
        key = uid("period")
        assert storage.periods.marker(key) is None
        before = storage.now()
        assert storage.periods.mark(key, ttl=HOUR, context_id="ctx-a") is True
        assert storage.periods.mark(key, ttl=HOUR, context_id="ctx-b") is False
        marker = storage.periods.marker(key)
        assert marker is not None and marker.context_id == "ctx-a"
        assert before - 1 <= marker.marked_at <= storage.now() + 1

    @pytest.mark.obligations("O-periods-4", "O-periods-2")
    def test_a_marker_without_a_context(self, storage: Storage) -> None:
        key = uid("period")
        assert storage.periods.mark(key, ttl=HOUR) is True
        marker = storage.periods.marker(key)
        assert marker is not None and marker.context_id is None
        assert storage.periods.mark(key, ttl=HOUR, context_id="ctx-a") is False

    @pytest.mark.obligations("O-periods-5")
    def test_marker_ttl(self, storage: Storage, probe: Probe) -> None:
        key = uid("period")
        storage.periods.mark(key, ttl=HOUR)
        assert_ttl(probe.ttl("period", key), HOUR)

    @pytest.mark.obligations("O-periods-6")
    def test_ttl_none_never_expires(self, storage: Storage, probe: Probe) -> None:
        key = uid("period")
        storage.periods.mark(key, ttl=None, context_id="ctx-a")
        assert probe.ttl("period", key) == math.inf

    @pytest.mark.obligations("O-periods-2")
    def test_a_losing_mark_does_not_restamp(self, storage: Storage, probe: Probe) -> None:
        key = uid("period")
        storage.periods.mark(key, ttl=120)
        storage.periods.mark(key, ttl=HOUR)
        assert_ttl(probe.ttl("period", key), 120)

    @pytest.mark.obligations("O-periods-7")
    def test_an_expired_marker_can_be_marked_again(self, storage: Storage, probe: Probe) -> None:
        key = uid("period")
        storage.periods.mark(key, ttl=HOUR, context_id="ctx-a")
        probe.expire("period", key)
        assert storage.periods.marker(key) is None
        assert storage.periods.mark(key, ttl=HOUR, context_id="ctx-b") is True
        marker = storage.periods.marker(key)
        assert marker is not None and marker.context_id == "ctx-b"

    @pytest.mark.obligations("O-periods-8")
    def test_a_ttl_that_is_not_positive_and_finite_is_refused(self, storage: Storage) -> None:
        """mark refuses a TTL of 0, a negative, infinite or NaN one with ``ValueError`` and
        marks nothing (docs/protocol.md, "Conventions")."""
        key = uid("period")
        for ttl in (0, 0.0, -1.0, math.inf, math.nan):
            with pytest.raises(ValueError):
                storage.periods.mark(key, ttl=ttl, context_id="ctx-a")
        assert storage.periods.marker(key) is None, teach(
            "periods",
            "a mark with a TTL that is not a positive finite number raises ValueError and "
            "marks nothing",
            "a TTL of 0 or a negative one sent to the backend instead of checked first",
            'docs/protocol.md, "Conventions"',
        )
        assert storage.periods.mark(key, ttl=HOUR, context_id="ctx-b") is True


class TestPeriods(PeriodsContract):
    """The periods contract against ``--reactor-storage``."""
