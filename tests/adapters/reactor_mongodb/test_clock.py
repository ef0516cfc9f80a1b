"""ServerClock: calibration against ``hello.localTime`` (fake command, injected wall clock)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo.errors import AutoReconnect
from reactor_mongodb._clock import ServerClock

from reactor.errors import StorageError


class Wall:
    """A wall clock that advances ``step`` seconds on every read."""

    def __init__(self, start: float, step: float = 0.0) -> None:
        self.t = start
        self.step = step

    def __call__(self) -> float:
        value = self.t
        self.t += self.step
        return value


def hello_at(epoch: float) -> Any:
    def command(name: str) -> dict[str, Any]:
        assert name == "hello"
        return {"localTime": datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None)}

    return command


def test_server_ahead_by_more_than_the_uncertainty_is_applied() -> None:
    wall = Wall(1000.0, step=0.002)
    clock = ServerClock(hello_at(1010.0), wall=wall)
    assert clock.now() == pytest.approx(1010.0, abs=0.01)
    assert clock.offset == pytest.approx(10.0, abs=0.01)


def test_offset_within_the_measurement_uncertainty_counts_as_zero() -> None:
    clock = ServerClock(hello_at(1000.0005), wall=Wall(1000.0, step=0.001))
    clock.calibrate()
    assert clock.offset == 0.0


def test_application_mode_never_calls_the_server() -> None:
    def fail(name: str) -> Any:
        raise AssertionError("no command expected")

    clock = ServerClock(fail, mode="application", wall=Wall(5.0))
    assert clock.now() == 5.0


def test_recalibrates_after_the_refresh_interval_and_never_goes_backwards() -> None:
    server = {"t": 1010.0}
    wall = Wall(1000.0)

    def command(name: str) -> dict[str, Any]:
        return {"localTime": datetime.fromtimestamp(server["t"], UTC)}

    clock = ServerClock(command, refresh_seconds=60, wall=wall)
    first = clock.now()
    wall.t += 61
    server["t"] = wall.t  # the server's clock was corrected: offset now 0
    second = clock.now()
    assert second >= first
    assert clock.offset == 0.0


def test_driver_errors_become_storage_errors() -> None:
    def down(name: str) -> Any:
        raise AutoReconnect("down")

    with pytest.raises(StorageError):
        ServerClock(down).now()


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        ServerClock(hello_at(0), mode="sundial")
    with pytest.raises(ValueError):
        ServerClock(hello_at(0), refresh_seconds=0)
