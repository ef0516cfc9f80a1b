"""What a hostile or careless user of the ``reactor`` command line must not get: passwords in
error messages, a worker that dies on a down backend, tracebacks for an outage, forged log
lines, unescaped control characters, commands that ignore ``-s`` or environment settings, a
second error line when a router is closed, multi-line usage errors (docs/workers.md, "Running
workers", "Dead letters")."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import cli, config
from reactor.cli import runs as runs_cli
from reactor.cli._common import display_url
from reactor.errors import ConfigurationError, StorageError
from reactor.jobs import sweep_tick
from reactor.jobs import worker as worker_module
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.records import RunPage, RunSummary
from reactor.model.text import escaping_logger, printable
from reactor.ports.router import Job
from reactor.ports.urls import redact_url

runner = CliRunner()
PASSWORD = "hunter2"


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("REACTOR_STORAGE_URL", "REACTOR_ROUTER_URL", "REACTOR_CONTEXT_TTL"):
        monkeypatch.delenv(name, raising=False)
    yield
    config.reset()


# -- 1. passwords in URL errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:hunter2@127.0.0.1:6379/0?bogus=1", "redis://:***@127.0.0.1:6379/0?bogus=1"),
        ("redis://u:hun/ter2@h/0", "redis://u:***@h/0"),  # an unencoded "/" in the password
        ("redis://u:hunter2@h:99999/0", "redis://u:***@h:99999/0"),  # a bad port
        ("redis://u:hunter2@[::1/0", "redis://u:***@[::1/0"),  # urlsplit would raise
        ("redis://:hun?ter2@h/0", "redis://:***@h/0"),
        ("dynamodb://t?endpoint_url=http://u:hunter2@h:1", "dynamodb://t?endpoint_url=http://u:***@h:1"),
        ("mongodb://h/db?tlsCertificateKeyFilePassword=hunter2",
         "mongodb://h/db?tlsCertificateKeyFilePassword=***"),
        ("u:hunter2@host", "***"),
    ],
)
def test_redact_url_hides_every_credential(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert display_url(url) == shown  # the CLI uses the same function


def _adapter_urls() -> list[Any]:
    urls: list[Any] = [
        pytest.param("redis://:hunter2@127.0.0.1:6379/0?bogus=1", id="redis-unknown-option"),
        pytest.param("redis://:hunter2@127.0.0.1:99999/0", id="redis-malformed"),
        pytest.param("redis://:hunter2@127.0.0.1/0?db=3", id="redis-two-databases"),
        pytest.param("memory://u:hunter2@host/", id="memory"),
        pytest.param("local://u:hunter2@host/", id="local"),
        pytest.param("user:hunter2@host", id="no-scheme"),
    ]
    try:
        import reactor_mongodb  # noqa: F401
    except ImportError:
        pass
    else:
        urls += [pytest.param("mongodb://u:hunter2@h/db?bogus=1", id="mongodb"),
                 pytest.param("mongodb://u:hunter2@h/d.b", id="mongodb-database")]
    try:
        import reactor_dynamodb  # noqa: F401
    except ImportError:
        pass
    else:
        urls += [pytest.param("dynamodb://tbl?bogus=1&aws_secret_access_key=hunter2",
                              id="dynamodb"),
                 pytest.param("dynamodb://tbl?endpoint_url=ftp://u:hunter2@h", id="endpoint")]
    return urls


@pytest.mark.parametrize("url", _adapter_urls())
@pytest.mark.parametrize("command", ["info", "ping"])
def test_a_bad_url_error_never_repeats_the_password(url: str, command: str) -> None:
    out = runner.invoke(cli.app, [command, "--storage", url])
    assert out.exit_code == 2, out.output
    assert "error:" in out.stderr
    assert PASSWORD not in out.output


def test_the_adapter_error_itself_is_redacted() -> None:
    with pytest.raises(ConfigurationError) as raised:
        config.storage_from_url("redis://:hunter2@127.0.0.1:6379/0?bogus=1")
    assert "unknown Redis URL option 'bogus'" in str(raised.value)
    assert PASSWORD not in str(raised.value)


# -- 2. worker --sweep on a down backend -------------------------------------------------------


def test_worker_sweep_start_survives_an_outage_and_retries(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []
    started = threading.Event()

    def schedule_next(runtime: Any) -> int:
        calls.append(1)
        if len(calls) < 3:
            raise StorageError("redis TIME failed: Connection refused")
        started.set()
        return 7

    monkeypatch.setattr(worker_module, "schedule_next", schedule_next)
    monkeypatch.setattr(worker_module, "receive_backoff", lambda failures: 0.01)
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter(workers=0))
    worker = Worker(runtime, sweep=True, poll_seconds=0.05)
    caplog.set_level(logging.INFO, logger="reactor.worker")
    worker.start()  # used to raise StorageError: the worker exited at once
    try:
        assert started.wait(5)
    finally:
        assert worker.stop(2)
    failed = [r for r in caplog.records if "event=sweep_chain_start_failed" in r.getMessage()]
    assert len(failed) == 2 and all(r.exc_info is None for r in failed)
    assert "StorageError: redis TIME failed" in failed[0].getMessage()
    assert any("event=sweep_chain_started window=7" in r.getMessage() for r in caplog.records)


def test_worker_sweep_retry_stops_with_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    def down(runtime: Any) -> int:
        raise StorageError("down")

    monkeypatch.setattr(worker_module, "schedule_next", down)
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter(workers=0))
    worker = Worker(runtime, sweep=True, poll_seconds=0.05)
    worker.start()
    assert worker.stop(2)  # the retry thread is joined, not left logging after exit


# -- 3. reactor sweep on a down backend --------------------------------------------------------


def _sweepers_down(monkeypatch: pytest.MonkeyPatch) -> None:
    def down(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("redis TIME failed: Error 111\nConnection refused")

    for name in ("sweep_runs", "sweep_steps", "sweep_maps"):
        monkeypatch.setattr(sweep_tick, name, down)


def test_a_down_backend_is_one_line_per_sweeper_without_tracebacks(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _sweepers_down(monkeypatch)
    caplog.set_level(logging.INFO, logger="reactor.sweeper")
    out = runner.invoke(cli.app, ["sweep", "--storage", "memory://"])
    assert out.exit_code == 1, out.output
    assert "runs: FAILED" in out.stdout
    failed = [r for r in caplog.records if "event=sweeper_failed" in r.getMessage()]
    assert [r.getMessage().split()[1] for r in failed] == [
        "sweeper=runs", "sweeper=steps", "sweeper=maps"
    ]
    for record in failed:
        assert record.exc_info is None  # no traceback below DEBUG
        assert "\n" not in record.getMessage()
        assert "error=StorageError: redis TIME failed" in record.getMessage()


def test_tracebacks_come_back_at_debug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _sweepers_down(monkeypatch)
    caplog.set_level(logging.DEBUG, logger="reactor.sweeper")
    out = runner.invoke(cli.app, ["sweep", "--storage", "memory://", "--log-level", "DEBUG"])
    assert out.exit_code == 1, out.output
    failed = [r for r in caplog.records if "event=sweeper_failed" in r.getMessage()]
    assert len(failed) == 3 and all(r.exc_info for r in failed)


def test_sweep_on_a_refused_backend_prints_one_stderr_line_per_sweeper() -> None:
    """One line per sweeper (runs, steps, maps, sleeping runs), each naming the error, and no
    traceback."""
    import reactor_redis  # noqa: F401  (installed by scripts/test: fail, never skip)
    url = "redis://127.0.0.1:1/0?socket_timeout=1"  # port 1: connection refused at once
    done = subprocess.run(
        [sys.executable, "-m", "reactor.cli", "sweep", "--storage", url, "--router", url],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert [line.split("sweeper=")[1].split()[0] for line in lines] == [
        "runs", "steps", "maps", "sleeps"
    ], done.stderr
    assert all("event=sweeper_failed" in line and "Error" in line for line in lines)
    assert "Traceback" not in done.stderr


# -- 4. log injection --------------------------------------------------------------------------


def test_the_worker_escapes_a_forged_job_id_in_its_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter(workers=0))
    job = Job(kind="run", payload={"context_id": "r\nevent=run_finished status=completed"},
              id="j1\n2026-01-01 INFO reactor.worker event=forged")
    runtime.router.enqueue(job)
    caplog.set_level(logging.INFO)
    Worker(runtime).run_pending()
    worker_lines = [r for r in caplog.records if r.name.startswith("reactor.")]
    assert worker_lines, "the poison job is logged"
    for record in worker_lines:
        assert "\n" not in record.getMessage()
    assert any("j1\\n2026-01-01" in r.getMessage() for r in worker_lines)


def test_escaping_logger_escapes_string_and_exception_arguments(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = escaping_logger("reactor.test_hardening")
    caplog.set_level(logging.INFO, logger="reactor.test_hardening")
    log.info("id=%s n=%d error=%s", "a\nb\u202e", 3, ValueError("x\ry"))
    assert caplog.records[-1].getMessage() == "id=a\\nb\\u202e n=3 error=x\\ry"
    assert caplog.records[-1].name == "reactor.test_hardening"
    assert caplog.records[-1].funcName.startswith("test_escaping_logger_escapes")


def test_printable_escapes_controls_and_format_characters() -> None:
    assert printable("ok é 中 \\") == "ok é 中 \\"
    assert printable("a\nb\tc\x1b\x85\u202e\u200b\u2028\U000e0001") == (
        "a\\nb\\tc\\x1b\\x85\\u202e\\u200b\\u2028\\U000e0001"
    )


# -- 5. runs text output -----------------------------------------------------------------------


def test_runs_list_escapes_stored_text(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter(workers=0))
    row = RunSummary(context_id="r1", reactor="evil\nforged\u202eX", status="completed",
                     created_at=0.0, updated_at=0.0)
    monkeypatch.setattr(runtime.storage.contexts, "page",
                        lambda cursor=None, limit=50: RunPage(runs=(row,), next_cursor=None))
    monkeypatch.setattr(runs_cli, "_runtime", lambda storage, router, setting=None: runtime)
    out = runner.invoke(cli.app, ["runs", "list"])
    assert out.exit_code == 0, out.output
    assert "evil\\nforged\\u202eX" in out.stdout
    assert "\u202e" not in out.stdout and len(out.stdout.splitlines()) == 2


# -- 6. -s/--setting and environment settings everywhere --------------------------------------


@pytest.mark.parametrize(
    "args",
    [["info"], ["ping"], ["runs", "list"], ["runs", "show", "nope"],
     ["dead-letters", "list", "--router", "local://"]],
)
def test_every_runtime_command_takes_settings_and_refuses_a_bad_one(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = runner.invoke(cli.app, [*args, "-s", "context_ttl=60", "--storage", "memory://"]
                        if args[0] != "dead-letters" else [*args, "-s", "context_ttl=60"])
    assert "No such option" not in out.output
    assert out.exit_code in (0, 1), out.output  # runs show nope: no such run
    monkeypatch.setenv("REACTOR_CONTEXT_TTL", "bogus")
    out = runner.invoke(cli.app, args)
    assert out.exit_code == 2, out.output
    assert "REACTOR_CONTEXT_TTL" in out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2  # the error (and the memory:// warning)


# -- 7. closing a router on a down backend -----------------------------------------------------


def test_closing_a_redis_router_on_a_down_backend_logs_at_debug_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import reactor_redis  # noqa: F401  (installed by scripts/test: fail, never skip)
    router = config.router_from_url("redis://127.0.0.1:1/0?socket_timeout=1")
    caplog.set_level(logging.DEBUG)
    router.close()
    leave = [r for r in caplog.records if "could not leave the group" in r.getMessage()]
    assert leave and all(r.levelno == logging.DEBUG for r in leave)


def test_ping_on_a_down_router_is_one_stderr_line() -> None:
    import reactor_redis  # noqa: F401  (installed by scripts/test: fail, never skip)
    url = "redis://127.0.0.1:1/0?socket_timeout=1"
    done = subprocess.run(
        [sys.executable, "-m", "reactor.cli", "ping", "--storage", "memory://", "--router", url],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


# -- 8. usage errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(["runs", "list", "--limit", "0"], "Invalid value for '--limit'"),
     (["nosuch"], "No such command 'nosuch'"),
     (["ping", "--bogus"], "No such option: --bogus")],
)
def test_a_usage_error_is_one_line_with_exit_2(
    argv: list[str], expected: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "argv", ["reactor", *argv])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and expected in err


def test_main_exits_0_after_a_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["reactor", "ping", "--storage", "memory://"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 0
    assert "storage memory://: ok" in capsys.readouterr().out


