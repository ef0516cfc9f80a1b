"""CalibratedClock: a server's clock read as the local clock plus a measured offset
(docs/writing-an-adapter.md, "Clocks")."""

from __future__ import annotations

import pytest

from reactor.errors import StorageError
from reactor.ports.clock import CalibratedClock


class _Wall:
    """A local clock that moves ``step`` seconds on every read."""

    def __init__(self, start: float, step: float = 0.0) -> None:
        self.value, self.step = start, step

    def __call__(self) -> float:
        value = self.value
        self.value += self.step
        return value


class _Server:
    """A server clock ``skew`` seconds ahead of ``wall``; counts its round trips."""

    def __init__(self, wall: _Wall, skew: float) -> None:
        self.wall, self.skew, self.calls = wall, skew, 0

    def __call__(self) -> float:
        self.calls += 1
        return self.wall.value + self.skew


def test_now_is_the_server_clock_without_a_round_trip_per_read() -> None:
    wall = _Wall(1000.0)
    server = _Server(wall, skew=5.0)
    clock = CalibratedClock(server, resolution=1e-6, refresh_seconds=60, wall=wall)
    assert clock.now() == pytest.approx(1005.0, abs=1e-5)
    for _ in range(100):
        wall.value += 0.1
        assert clock.now() == pytest.approx(wall.value + 5.0, abs=1e-5)
    assert server.calls == 1  # 10 s of reads, one calibration
    wall.value += 60
    clock.now()
    assert server.calls == 2


def test_an_offset_within_the_uncertainty_counts_as_zero() -> None:
    wall = _Wall(1000.0, step=0.002)  # the server reads 1000.002 during a 1000.000-1000.002 trip
    clock = CalibratedClock(_Server(wall, skew=0.0), resolution=1e-3, wall=wall)
    assert clock.calibrate() == 0.0  # 1.5 ms measured, within 1 ms + 1 ms of uncertainty
    skewed = CalibratedClock(_Server(wall, skew=0.5), resolution=1e-3, wall=wall)
    assert skewed.calibrate() == pytest.approx(0.5015, abs=1e-9)


def test_now_never_goes_backwards_when_the_offset_shrinks() -> None:
    wall = _Wall(1000.0)
    server = _Server(wall, skew=10.0)
    clock = CalibratedClock(server, resolution=1e-6, refresh_seconds=1, wall=wall)
    first = clock.now()
    server.skew = 0.0  # the server was stepped back
    wall.value += 1
    assert clock.now() >= first


def test_a_failed_calibration_raises_and_the_next_read_retries() -> None:
    wall = _Wall(1000.0)
    calls: list[int] = []

    def flaky() -> float:
        calls.append(1)
        if len(calls) == 1:
            raise StorageError("server down")
        return wall.value

    clock = CalibratedClock(flaky, resolution=1e-6, wall=wall)
    with pytest.raises(StorageError):
        clock.now()
    assert clock.now() == pytest.approx(1000.0, abs=1e-5)


@pytest.mark.parametrize("bad", [{"refresh_seconds": 0}, {"resolution": 0.0}])
def test_bad_settings_are_refused(bad: dict[str, float]) -> None:
    args = {"resolution": 1e-6, **bad}
    with pytest.raises(ValueError):
        CalibratedClock(lambda: 0.0, **args)
