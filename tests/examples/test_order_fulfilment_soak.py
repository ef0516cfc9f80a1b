"""The chaos soak of the worker saga (docs/workers.md, "Soak").

* The soak itself (marked ``soak``: CI's soak step runs it): ``--smoke`` against Redis — 2
  worker processes, 100 orders, 5 SIGKILLs, 3 ``CLIENT PAUSE``s — and against PostgreSQL — the
  same with 3 server restarts (``pg_ctl restart -m fast``) instead of the pauses — must end
  with every run terminal and 0 violations. Its assertions are the soak's invariant checks,
  not timings.
* Its building blocks, fast: services shared through the SQLite journal (two processes' views
  agree, replays are exact, a tampered journal is caught), the repeat rule (a side effect
  repeats only as often as unclean executions explain) and the command line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from examples.order_fulfilment.services import CarrierUnavailable, OutOfStock
from examples.order_fulfilment.shared_services import Journal, OpRow, SharedServices
from examples.order_fulfilment.soak import (
    PAUSE_MECHANISMS,
    SMOKE,
    default_pause,
    namespaced,
    parse_args,
    unexplained_repeats,
)

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(r"^soak: (\d+) runs, (\d+) completed, (\d+) failed, (\d+) violations, "
                     r"quiescence ([0-9.]+) s, kills (\d+)(?:, restarts (\d+))?$", re.MULTILINE)


def _smoke(
    storage: str, tmp_path: Path, *extra: str, restarts: int | None = None,
    router: str | None = None, orders: int = int(SMOKE["orders"]),
) -> None:
    """Run the smoke soak on ``storage`` (and ``router``, default the same URL) and check its
    summary (``restarts``: the server restarts it must report, under ``--pause restart``;
    ``orders``: the orders it submits, default the smoke's)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("REACTOR_STORAGE_URL", "REACTOR_ROUTER_URL")}
    slow = "--stall" in extra
    proc = subprocess.run(
        [sys.executable, "-m", "examples.order_fulfilment.soak", "--smoke",
         "--storage", storage, "--router", router or storage, "--run-dir", str(tmp_path / "soak"),
         *(() if orders == SMOKE["orders"] else ("--orders", str(orders))), *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
        timeout=SLOW_SERVER_TEST_TIMEOUT - 10 if slow else 320,
    )
    logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                     for p in sorted((tmp_path / "soak").glob("w*.log"))[-3:])
    report = f"{proc.stdout}\n{proc.stderr}\n{logs}"
    print(proc.stdout)  # the soak's progress and figures (pytest -rP shows them)
    assert proc.returncode == 0, report
    match = SUMMARY.search(proc.stdout)
    assert match is not None, report
    runs, completed, failed, violations, _, kills = (
        int(float(g)) for g in match.groups()[:6])
    assert violations == 0, report
    made = match.group(7)
    assert (None if made is None else int(made)) == restarts, report
    assert runs == orders == completed + failed
    assert kills == SMOKE["kills"]
    assert completed > 0
    if orders >= 50:
        assert failed > 0  # the dataset's failing fraction took part


@pytest.mark.soak
@pytest.mark.timeout(330)
def test_the_smoke_soak_on_redis_keeps_every_invariant(
    service_url: Callable[[str], str], tmp_path: Path
) -> None:
    _smoke(service_url("redis"), tmp_path)


@pytest.mark.soak
@pytest.mark.timeout(330)
def test_the_smoke_soak_on_postgres_keeps_every_invariant(
    service_url: Callable[[str], str], tmp_path: Path
) -> None:
    """Storage and router on PostgreSQL, 5 worker SIGKILLs and a server restart every
    ``pause_every`` seconds of the load phase (``pg_ctl restart -m fast``: every pooled
    connection of every process dies; a SIGSTOP of the postmaster would not stop its
    backends, so the server is restarted rather than paused)."""
    restart = service_url("postgres_restart")
    load = SMOKE["kills"] * SMOKE["kill_every"]
    expected = len([k for k in range(1, 100) if k * SMOKE["pause_every"] < load])
    assert expected >= 2  # a couple of restarts under load
    _smoke(f"{service_url('postgres')}?schema=soak", tmp_path, "--pause", "restart",
           "--restart-command", restart, restarts=expected)


#: Orders of the smoke on the slow Python test servers (SecantusDB, moto): their sustained rate
#: is about 0.6 orders/s (docs/workers.md, "Soak"), so the smoke submits 20 over its 30 s load
#: phase instead of 100, with the same kills and SIGSTOP pauses of the server.
SLOW_SERVER_ORDERS = 20
#: Their liveness and visibility leases, in seconds. Rule 1 of docs/workers.md ("Settings that
#: drain") asks ``lease >= 1.5 x (P + 2 L)``: with the smoke's 1 s SIGSTOPs (``P``) and round
#: trips (``L``) that reach seconds when two suites share this machine with these single-process
#: servers (moto applies DynamoDB requests one at a time), the soak's 6 s leases lapsed on slow
#: renewals and 15 of 20 runs were still being re-run at the 120 s drain deadline. 30 s covers
#: ``L`` up to 9.5 s; recovering a killed worker's runs then takes about 30 s more (rule 4).
SLOW_SERVER_LEASES = ("-s", "context_lock_ttl=30", "-s", "visibility_timeout=30")
#: How long they wait for the runs to drain. Their rate is what a single-process Python server
#: on a share of a loaded machine sustains: idle, the 20 DynamoDB orders drain 33 s after the
#: load; with three suites on the machine, 1 of 20 had finished at a fixed 120 s while elements
#: were still settling every few seconds. So the wait is bounded by progress: it gives up when
#: no run was stored again for 150 s (none finished or moved on; longer than a killed worker's
#: recovery, rule 4 of "Settings that drain": 30 s lease + 30 s visibility + sweeps), and at
#: most 480 s.
SLOW_SERVER_WAIT = ("--timeout", "480", "--stall", "150")
#: Orders of the smoke on moto: it applies DynamoDB requests one at a time in one Python
#: process, and with two suites on the machine it completed about one job per worker thread
#: every 5 s, so 20 orders (about 200 jobs) did not drain in 480 s while 10 do; the kills and
#: pauses are the same.
MOTO_ORDERS = 10
#: The test's own bound: the load (30 s), the wait, the workers' stop and the checks.
SLOW_SERVER_TEST_TIMEOUT = 660


@pytest.mark.soak
@pytest.mark.timeout(SLOW_SERVER_TEST_TIMEOUT)
def test_the_smoke_soak_on_the_mongodb_wire_server_drains_and_keeps_every_invariant(
    service_url: Callable[[str], str], tmp_path: Path
) -> None:
    """Storage and router on MongoDB (the SecantusDB wire server), 5 worker SIGKILLs and
    3 SIGSTOPs of the server (docs/workers.md, "Sweep cursors and dispatch leases")."""
    url = service_url("mongodb_wire").replace("/?", "/soak?", 1)
    _smoke(url, tmp_path, "--pause", "sigstop", "--server-pid", service_url("mongodb_wire_pid"),
           *SLOW_SERVER_LEASES, *SLOW_SERVER_WAIT, orders=SLOW_SERVER_ORDERS)


@pytest.mark.soak
@pytest.mark.timeout(SLOW_SERVER_TEST_TIMEOUT)
def test_the_smoke_soak_on_dynamodb_and_sqs_drains_and_keeps_every_invariant(
    service_url: Callable[[str], str], tmp_path: Path
) -> None:
    """Storage on DynamoDB, router on SQS (moto's server), 5 worker SIGKILLs and 3 SIGSTOPs
    of the server (docs/workers.md, "Sweep cursors and dispatch leases")."""
    aws = f"region=us-east-1&endpoint_url={service_url('moto')}"
    _smoke(f"dynamodb://reactor-soak?{aws}", tmp_path, "--pause", "sigstop",
           "--server-pid", service_url("moto_pid"), *SLOW_SERVER_LEASES, *SLOW_SERVER_WAIT,
           router=f"sqs://reactor-soak?{aws}", orders=MOTO_ORDERS)


# --------------------------------------------------------------------------------------------
# shared services
# --------------------------------------------------------------------------------------------


@pytest.fixture
def journals(tmp_path: Path) -> Iterator[Callable[[], Journal]]:
    """Opens journals on one file (as several processes would); closes them afterwards."""
    opened: list[Journal] = []

    def open_one() -> Journal:
        opened.append(Journal(tmp_path / "journal.sqlite"))
        return opened[-1]

    yield open_one
    for journal in opened:
        journal.close()


def test_two_processes_see_one_state_through_the_journal(
    journals: Callable[[], Journal]
) -> None:
    a = SharedServices(journals(), "w1")
    b = SharedServices(journals(), "w2")
    first = a.services.inventory.reserve("ORD-000001", "LMP-ARC-BRS", 2)
    again = b.services.inventory.reserve("ORD-000001", "LMP-ARC-BRS", 2)  # idempotent in b too
    assert again == first
    with pytest.raises(OutOfStock):  # b sees a's reservation: the 2 lamps are gone
        b.services.inventory.reserve("ORD-000002", "LMP-ARC-BRS", 1)
    assert a.services.inventory.free("LMP-ARC-BRS") == 0
    auth = b.services.ledger.authorize("ORD-000001", "tok_visa", Decimal("9.90"), "EUR")
    assert a.services.ledger.capture(auth.id).amount == Decimal("9.90")

    journal = journals()
    ops = journal.ops()
    assert [(o.method, o.worker, o.outcome, o.order_id) for o in ops] == [
        ("reserve", "w1", "ok", "ORD-000001"),
        ("reserve", "w2", "ok", "ORD-000001"),
        ("reserve", "w2", "OutOfStock", "ORD-000002"),
        ("authorize", "w2", "ok", "ORD-000001"),
        ("capture", "w1", "ok", "ORD-000001"),  # order found through the audit event
    ]
    assert ops[0].key == ops[1].key != ops[2].key
    assert all(o.episode is None for o in ops)  # made outside any job
    final, divergences = journal.replay()
    assert divergences == [] and a.divergences == [] and b.divergences == []
    assert [r.id for r in final.inventory.reservations()] == [first.id]
    assert len(final.ledger.captures("ORD-000001")) == 1


def test_a_journal_that_does_not_replay_to_what_was_seen_is_reported(
    journals: Callable[[], Journal]
) -> None:
    shared = SharedServices(journals(), "w1")
    shared.services.inventory.reserve("ORD-000001", "LMP-ARC-BRS", 2)
    with pytest.raises(OutOfStock):
        shared.services.inventory.reserve("ORD-000002", "LMP-ARC-BRS", 2)
    journal = journals()
    with journal.write() as conn:
        conn.execute("UPDATE ops SET outcome = 'ok' WHERE seq = 2")
    _, divergences = journal.replay()
    assert divergences == ["journal call 2 inventory.reserve: recorded ok, replayed OutOfStock"]


# --------------------------------------------------------------------------------------------
# the repeat rule
# --------------------------------------------------------------------------------------------


def _op(seq: int, method: str, episode: str | None, *, worker: str = "w1", outcome: str = "ok",
        key: str | None = None) -> OpRow:
    service = "carrier" if method == "book" else "inventory"
    return OpRow(seq, service, method, key or f"{service}.{method}:ORD-000009", "ORD-000009",
                 outcome, worker, episode, float(seq))


def test_a_side_effect_repeated_by_clean_executions_is_a_violation() -> None:
    ops = [_op(1, "reserve", "w1:a"), _op(2, "reserve", "w2:b", worker="w2")]
    clean = {"w1:a": (True, ""), "w2:b": (True, "")}
    violations, _, reruns = unexplained_repeats(ops, clean, {})
    assert len(violations) == 1 and reruns == 0
    assert "inventory.reserve ran 2 times, 1 expected + 0 explained" in violations[0]


@pytest.mark.parametrize(
    ("episodes", "killed", "why"),
    [
        ({"w2:b": (True, "")}, {"w1": 1.0}, "killed"),  # w1 died: its episode never ended
        ({"w1:a": (False, "raised StorageError: x"), "w2:b": (True, "")}, {}, "raised"),
        ({"w1:a": (False, "event=liveness_lost ..."), "w2:b": (True, "")}, {}, "lost"),
        ({"w2:b": (True, "")}, {}, "not recorded"),
    ],
)
def test_a_repeat_after_an_unclean_execution_is_allowed(
    episodes: dict[str, tuple[bool, str]], killed: dict[str, float], why: str
) -> None:
    ops = [_op(1, "reserve", "w1:a"), _op(2, "reserve", "w2:b", worker="w2")]
    violations, _, reruns = unexplained_repeats(ops, episodes, killed)
    assert violations == [] and reruns == 1, why
    third = [*ops, _op(3, "reserve", "w2:c", worker="w2")]
    violations, _, _ = unexplained_repeats(third, {**episodes, "w2:c": (True, "")}, killed)
    assert len(violations) == 1  # one unclean execution explains one repeat, not two


def test_booking_retries_count_up_to_the_attempts_plus_unclean_ones() -> None:
    unavailable = CarrierUnavailable.__name__
    books = [_op(n, "book", f"w1:{n}", outcome=unavailable) for n in (1, 2, 3)]
    clean = {f"w1:{n}": (True, "") for n in range(1, 6)}
    assert unexplained_repeats(books, clean, {}) == ([], {"ORD-000009": 0}, 0)
    four = [*books, _op(4, "book", "w1:4", outcome=unavailable)]
    violations, _, _ = unexplained_repeats(four, clean, {})
    assert len(violations) == 1 and "carrier.book ran 4 times, 3 expected" in violations[0]
    dirty = {**clean, "w1:2": (False, "raised StorageError: x")}
    assert unexplained_repeats(four, dirty, {}) == ([], {"ORD-000009": 1}, 1)


def test_a_call_outside_any_job_is_a_violation() -> None:
    violations, _, _ = unexplained_repeats([_op(1, "reserve", None)], {}, {})
    assert violations == ["ORD-000009: inventory.reserve (call 1) ran outside any job in w1"]


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------


def test_restart_options() -> None:
    opts = parse_args(["--smoke", "--storage", "postgresql://h/db", "--pause", "restart",
                       "--restart-command", "pg_ctl -D d -m fast -w restart"])
    assert "restart" in PAUSE_MECHANISMS
    assert (opts.pause, opts.restart_command) == ("restart", "pg_ctl -D d -m fast -w restart")
    assert opts.pause_every == SMOKE["pause_every"]
    auto = parse_args(["--storage", "postgresql://h/db"])
    assert auto.pause == "auto" and auto.restart_command is None
    assert default_pause("postgresql://h/db", None) == "none"  # auto never restarts


def test_smoke_options_urls_and_pause_defaults() -> None:
    opts = parse_args(["--smoke", "--storage", "redis://127.0.0.1:1/0", "--kills", "2"])
    assert (opts.orders, opts.workers, opts.kills) == (SMOKE["orders"], SMOKE["workers"], 2)
    assert opts.router == opts.storage and opts.pause == "auto"
    assert opts.timeout == SMOKE["timeout"] and opts.stall is None  # the whole timeout
    waits = parse_args(["--storage", "redis://h:1/0", "--timeout", "480", "--stall", "150"])
    assert (waits.timeout, waits.stall) == (480.0, 150.0)
    assert namespaced("redis://h:1/0", "soakx") == "redis://h:1/0?prefix=soakx"
    assert namespaced("mongodb://h/?directConnection=true", "soakx") == (
        "mongodb://h/?directConnection=true&prefix=soakx_")
    assert namespaced("sqs://q?prefix=mine", "soakx") == "sqs://q?prefix=mine"
    assert default_pause("redis://h:1/0", None) == "client-pause"
    assert default_pause("mongodb://h/", None) == "none"
    assert default_pause("dynamodb://t?region=x", 42) == "sigstop"


@pytest.mark.parametrize("argv", [
    ["--storage", "memory://"],
    ["--storage", "redis://h:1/0", "--router", "local://"],
    ["--storage", "redis://h:1/0", "--orders", "5000"],
    ["--storage", "redis://h:1/0", "--stall", "0"],
    ["--storage", "mongodb://h/", "--pause", "sigstop"],
    ["--storage", "postgresql://h/db", "--pause", "restart"],
    ["--storage", "postgresql://h/db", "--pause", "restart", "--restart-command", " "],
    ["--storage", "postgresql://h/db", "--restart-command", "true"],
    ["--storage", "postgresql://h/db", "--pause", "restart", "--restart-command", "true",
     "--pause-every", "0"],
    [],
])
def test_bad_options_exit_2(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTOR_STORAGE_URL", raising=False)
    monkeypatch.delenv("REACTOR_ROUTER_URL", raising=False)
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
