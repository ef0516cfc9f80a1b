"""reactor.ports.driver_errors: driver exceptions become reactor errors, chained; reactor's own
errors and interruptions pass through untouched (docs/protocol.md, "Adapter toolkit")."""

from __future__ import annotations

import pytest

from reactor.errors import ContextTooLargeError, ReactorError, RouterError, StorageError
from reactor.ports.driver_errors import close_quietly, translate_errors


class DriverError(Exception):
    """Stands for a driver's base exception (PyMongoError, RedisError, ...)."""


class OtherDriverError(OSError):
    """A second driver exception family (as boto3 has ClientError and BotoCoreError)."""


class DriverAndReactorError(StorageError, DriverError):
    """A reactor error that is also an instance of the driver class."""


def test_a_driver_error_becomes_a_storage_error_naming_the_operation() -> None:
    original = DriverError("connection refused")
    with pytest.raises(StorageError) as excinfo, translate_errors(DriverError, what="Test w"):
        raise original
    error = excinfo.value
    assert type(error) is StorageError
    assert str(error) == "Test w failed: connection refused"
    assert error.__cause__ is original
    assert error.__suppress_context__ is True


def test_the_reactor_error_and_several_driver_classes_can_be_chosen() -> None:
    drivers = (DriverError, OtherDriverError)
    with (
        pytest.raises(RouterError, match=r"^Test enqueue failed: disk full$") as excinfo,
        translate_errors(drivers, what="Test enqueue", into=RouterError),
    ):
        raise OtherDriverError("disk full")
    assert isinstance(excinfo.value.__cause__, OtherDriverError)


def test_a_driver_error_without_a_message_is_named_by_its_class() -> None:
    with (
        pytest.raises(StorageError, match=r"^Test read failed: DriverError$"),
        translate_errors(DriverError, what="Test read"),
    ):
        raise DriverError()


@pytest.mark.parametrize(
    "error",
    [
        ContextTooLargeError("too big", size_bytes=2, limit_bytes=1),
        DriverAndReactorError("already a reactor error"),
        StorageError("raised by the adapter itself"),
    ],
)
def test_reactor_errors_pass_through_unchanged(error: ReactorError) -> None:
    with (
        pytest.raises(ReactorError) as excinfo,
        translate_errors((DriverError, ValueError), what="Test write"),
    ):
        raise error
    assert excinfo.value is error
    assert error.__cause__ is None


def test_an_error_that_is_not_a_driver_error_passes_through_unchanged() -> None:
    original = KeyError("k")
    with pytest.raises(KeyError) as excinfo, translate_errors(DriverError, what="Test read"):
        raise original
    assert excinfo.value is original


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_interruptions_pass_through_even_when_named(interruption: type[BaseException]) -> None:
    original = interruption()
    with (
        pytest.raises(interruption) as excinfo,
        translate_errors(BaseException, what="Test wait"),
    ):
        raise original
    assert excinfo.value is original
    assert original.__cause__ is None


def test_without_an_error_the_block_runs_and_returns() -> None:
    def read() -> int:
        with translate_errors(DriverError, what="Test read"):
            return 42

    assert read() == 42


def test_one_instance_can_be_entered_again() -> None:
    translate = translate_errors(DriverError, what="Test op")
    for attempt in ("first", "second"):
        with pytest.raises(StorageError, match=f"Test op failed: {attempt}"), translate:
            raise DriverError(attempt)


def test_as_a_decorator_it_translates_every_call_and_keeps_the_function_s_name() -> None:
    calls: list[int] = []

    @translate_errors(DriverError, what="Test ping")
    def ping(value: int) -> int:
        """Ping."""
        calls.append(value)
        if value < 0:
            raise DriverError("negative")
        return value * 2

    assert ping(3) == 6
    with pytest.raises(StorageError, match="Test ping failed: negative"):
        ping(-1)
    assert calls == [3, -1]
    assert (ping.__name__, ping.__doc__) == ("ping", "Ping.")


def test_close_quietly_runs_every_closer_despite_failures() -> None:
    closed: list[str] = []

    def failing() -> None:
        closed.append("failing")
        raise DriverError("already closed")

    close_quietly(lambda: closed.append("first"), failing, lambda: closed.append("last"))
    assert closed == ["first", "failing", "last"]


def test_close_quietly_lets_an_interruption_through() -> None:
    closed: list[str] = []

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        close_quietly(interrupted, lambda: closed.append("never"))
    assert closed == []
