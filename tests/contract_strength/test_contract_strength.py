"""The contract suite rejects every shipped mutant adapter (docs/contract-suite.md, "Bug classes
the suite rejects").

For each mutant of :mod:`reactor_mutants` this runs ``pytest --pyargs reactor_contract.<module>
-x`` in a subprocess against ``mutant://<name>`` and asserts the run *fails* -- with test
failures, not a crash, an internal error or a hang -- and, where the mutant names one, with the
message that teaches the rule. Each mutant runs only the contract modules of the concern it
breaks, which keeps the whole strength run short: a failure there is a failure of the full
suite, which contains those modules.

The ``mutant`` URL scheme exists only inside those subprocesses: a throw-away ``.dist-info``
declares its entry points (:func:`reactor_mutants.write_entry_points`), and the subprocess's
``PYTHONPATH`` holds it and this directory. A control run of the unbroken ``mutant://none``
proves the harness itself passes, so a "killed" mutant is never an artefact of the harness.

Each run is a pytest session in a process of its own, forked from a server that has already
imported pytest, reactor and the backends' libraries (:mod:`forkserver`): a fresh interpreter
would spend most of each short run importing them.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.contract_strength.forkserver import ForkServer
from tests.contract_strength.reactor_mutants import CONTROLS, MUTANTS, Mutant, write_entry_points

HERE = Path(__file__).resolve().parent
#: Seconds one run may take before the runner calls the session wedged. A hang inside a test
#: is the per-test timeout's to catch (:data:`TEST_TIMEOUT`); this is only a backstop, sized so
#: that a loaded machine slows a pass down without failing it: the control run of every storage
#: module on the unbroken adapter (the longest run) took over 120 s with two more full suites
#: on this 2-core machine.
RUN_TIMEOUT = 600.0
#: The contract suite's own per-test timeout inside those runs.
TEST_TIMEOUT = "20"
#: The per-test timeout of a router's run of ``test_driver_faults``: it walks every request of a
#: router operation with every fault kind, each followed by a wait past the visibility window
#: (and a duplicate dead letter by a few more seconds of listing), longer than
#: :data:`TEST_TIMEOUT` on the unbroken router and close to it on a mutant.
ROUTER_FAULTS_TEST_TIMEOUT = "60"
#: The test service each backend's mutants run against (tests/services.py), if any.
SERVICES = {"redis": "redis", "dynamodb": "moto"}
#: Mutant runs in flight at once (two use both cores of the CI machine).
PARALLEL_RUNS = 2


def router_timeout(modules: tuple[str, ...]) -> tuple[str, ...]:
    """The extra option a router's run of ``modules`` needs (see
    :data:`ROUTER_FAULTS_TEST_TIMEOUT`); a later ``--reactor-test-timeout`` wins."""
    if "reactor_contract.test_driver_faults" in modules:
        return (f"--reactor-test-timeout={ROUTER_FAULTS_TEST_TIMEOUT}",)
    return ()


@pytest.fixture(scope="module")
def entry_points(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory declaring the ``mutant`` scheme's entry points."""
    return write_entry_points(tmp_path_factory.mktemp("mutant-entry-points"))


def suite_env(entry_points: Path) -> dict[str, str]:
    """The environment of every run: this one, with the ``mutant`` scheme on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(entry_points), *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


@pytest.fixture(scope="module")
def forks(entry_points: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    """The fork server the runs start from (stopped, with any run left, after the module)."""
    server = ForkServer(suite_env(entry_points),
                        tmp_path_factory.mktemp("forkserver") / "server.log")
    try:
        yield server
    finally:
        server.close()


def backend_env(backend: str | None, service_url: Callable[[str], str]) -> dict[str, str]:
    """The environment a backend mutant's run needs: its service URL (``service_url`` fails
    the test when scripts/test did not start it, as every backend test does)."""
    service = SERVICES.get(backend or "")
    if service is None:
        return {}
    variable = {"redis": "REACTOR_TEST_REDIS_URL", "moto": "REACTOR_TEST_MOTO_URL"}[service]
    return {variable: service_url(service)}


def run_suite(
    forks: ForkServer, modules: tuple[str, ...], storage: str, router: str | None, *extra: str,
    env_extra: dict[str, str] | None = None,
) -> tuple[int, str, float]:
    """Run the contract modules against the mutant URLs, ``pytest ARGS`` in a process of its
    own; ``(exit code, output, seconds)``."""
    env = {**forks.env, **(env_extra or {})}
    # Preloaded modules cannot be assertion-rewritten in the forked session (forkserver.py).
    args = [
        "-x", "-q", "-p", "no:cacheprovider", "-W",
        "ignore::pytest.PytestUnraisableExceptionWarning", "-W",
        "ignore::pytest.PytestAssertRewriteWarning", "--pyargs", *modules,
        f"--reactor-storage={storage}", f"--reactor-test-timeout={TEST_TIMEOUT}", *extra,
    ]
    if router is not None:
        args.append(f"--reactor-router={router}")
    with tempfile.TemporaryDirectory(prefix="mutant-run-") as scratch:
        output = Path(scratch) / "output.txt"
        started = time.monotonic()
        code = forks.run(args, env=env, output=output, timeout=RUN_TIMEOUT)
        seconds = time.monotonic() - started
        return code, output.read_text(errors="replace"), seconds


def test_the_unbroken_adapter_passes_through_the_harness(forks: ForkServer) -> None:
    """Control: ``mutant://none`` passes every storage module the mutants run (and the router
    wiring), so every failure below is the mutant's, never the harness's."""
    storage_modules = sorted({m for x in MUTANTS if x.kind == "storage" for m in x.modules})
    code, output, _ = run_suite(forks, tuple(storage_modules), "mutant://none", None)
    assert code == 0, output[-4000:]
    assert "documents" in output and "FAIL" not in output
    # The router selections pass on the real local:// router in every contract run; here only
    # the scheme's wiring (factory, probe, URL options) is checked, to keep the run short.
    code, output, _ = run_suite(
        forks, ("reactor_contract.test_routers",), "mutant://none", "mutant://none",
        "-k", "round_trip or max_jobs or never_delivers_before_the_delay",
    )
    assert code == 0 and "3 passed" in output, output[-4000:]


@pytest.mark.parametrize("backend", sorted(CONTROLS))
def test_the_unbroken_backend_builders_pass_through_the_harness(
    forks: ForkServer, service_url: Callable[[str], str], backend: str
) -> None:
    """Control for the backend mutants: each backend's unbroken builder (the real adapter, built
    as its mutants are) passes every module its mutants run, so a kill is the mutant's bug."""
    storage, router = CONTROLS[backend]
    mutants = [m for m in MUTANTS if m.backend == backend]
    storage_modules = sorted({m for x in mutants if x.kind == "storage" for m in x.modules})
    env = backend_env(backend, service_url)
    code, output, _ = run_suite(forks, tuple(storage_modules), storage, None,
                                env_extra=env)
    assert code == 0 and "FAIL" not in output, output[-4000:]
    if router is not None:  # the modules and selections of its router mutants
        routers = [m for m in mutants if m.kind == "router"]
        router_modules = tuple(sorted({m for x in routers for m in x.modules}))
        selects = [m.select for m in routers]
        extra = () if None in selects else ("-k", " or ".join(f"({s})" for s in selects))
        code, output, _ = run_suite(
            forks, router_modules, "mutant://none", router, *extra,
            *router_timeout(router_modules), env_extra=env,
        )
        assert code == 0 and "FAIL" not in output and " passed" in output, output[-4000:]


def test_a_hanging_adapter_fails_within_the_per_test_timeout(forks: ForkServer) -> None:
    """``--reactor-test-timeout``: a scan that never returns fails its test, naming it and the
    likely causes, and the traceback shows where it was stuck."""
    code, output, seconds = run_suite(
        forks, ("reactor_contract.test_documents",), "mutant://scan_hangs", None,
        "-k", "ascending_order or round_trips", "--reactor-test-timeout=1",
    )
    assert code == 1, output[-4000:]
    assert "1 failed, 1 passed" in output, output[-4000:]
    assert "test_scan_lists_keys_in_ascending_order did not finish its call within 1s" in output
    assert "strictly greater" in output and "time.sleep" in output  # causes, and where it hung
    assert seconds < 30


def test_a_slow_adapter_import_does_not_count_against_the_per_test_timeout(
    forks: ForkServer,
) -> None:
    """The adapter's module is imported before any test's timer starts: an import that takes
    longer than ``--reactor-test-timeout`` (boto3 on a cold disk) is slow, not stuck."""
    code, output, _ = run_suite(
        forks, ("reactor_contract.test_documents",), "mutant://none", None,
        "-k", "round_trips", "--reactor-test-timeout=1",
        env_extra={"REACTOR_MUTANTS_IMPORT_DELAY": "1.5"},
    )
    assert code == 0, output[-4000:]
    assert "1 passed" in output and "did not finish" not in output, output[-4000:]


def test_an_adapter_cannot_mark_a_concern_not_applicable(
    forks: ForkServer, tmp_path: Path
) -> None:
    """Only the suite marks a concern ``n/a`` (``documents`` on a storage without a
    ``DocumentStore``): claims skipped with a forged "not applicable:" reason fail the verdict,
    they do not vanish from it (docs/contract-suite.md, "Verdicts")."""
    report = tmp_path / "verdict.json"
    code, output, _ = run_suite(
        forks, ("reactor_contract.test_claims",), "mutant://claims_not_applicable", None,
        f"--reactor-json={report}",
    )
    assert code == 1, output[-4000:]
    verdict = json.loads(report.read_text())
    assert verdict["verdict"] == "failed" and verdict["concerns"]["claims"]["verdict"] == "FAIL"


def test_a_skipped_mandatory_concern_fails_the_verdict(
    forks: ForkServer, tmp_path: Path
) -> None:
    """Capability honesty: an adapter whose probe skips the locks tests ("capability: locks
    not supported") is not certified with a gap, it fails (exit 1) with the teaching line; the
    unbroken adapter is certified on the same run."""
    report = tmp_path / "verdict.json"
    code, output, _ = run_suite(
        forks, ("reactor_contract.test_locks",), "mutant://declares_no_locks", None,
        f"--reactor-json={report}",
    )
    assert code == 1, output[-4000:]
    assert "a mandatory concern cannot be skipped" in output and "verdict: FAILED" in output
    verdict = json.loads(report.read_text())
    assert verdict["verdict"] == "failed" and verdict["concerns"]["locks"]["verdict"] == "FAIL"
    code, output, _ = run_suite(
        forks, ("reactor_contract.test_locks",), "mutant://none", None,
        f"--reactor-json={report}",
    )
    assert code == 0 and "verdict: certified" in output, output[-4000:]
    assert json.loads(report.read_text())["verdict"] == "certified"


def test_the_mutants_cover_every_concern_with_a_bug_class() -> None:
    assert len(MUTANTS) >= 40
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    assert all(m.bug and m.modules and m.kind in ("storage", "router") for m in MUTANTS)
    concerns = {m.concern for m in MUTANTS}
    assert {"documents", "locks", "step_results", "map_rollbacks", "sweeps", "routers"} <= concerns
    assert {m.backend for m in MUTANTS} == {None, "redis", "sqlite", "mongomock", "dynamodb"}


def _run_mutant(
    forks: ForkServer, mutant: Mutant, env_extra: dict[str, str]
) -> tuple[int, str, float]:
    url = f"mutant://{mutant.name}"
    storage, router = (url, None) if mutant.kind == "storage" else ("mutant://none", url)
    extra = ("-k", mutant.select) if mutant.select else ()
    if router is not None:
        extra += router_timeout(mutant.modules)
    return run_suite(forks, mutant.modules, storage, router, *extra, env_extra=env_extra)


def _selected_mutants(session: pytest.Session) -> list[Mutant]:
    """The mutants whose test this session runs, in run order (``-k`` selects a few)."""
    chosen: list[Mutant] = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if (getattr(item, "originalname", None) == "test_the_contract_suite_rejects_the_mutant"
                and callspec is not None):
            chosen.append(callspec.params["mutant"])
    return chosen


@pytest.fixture(scope="module")
def mutant_runs(
    request: pytest.FixtureRequest, forks: ForkServer, service_url: Callable[[str], str]
) -> Iterator[dict[str, Future[tuple[int, str, float]]]]:
    """The run of every mutant this session tests (all of them, or those ``-k`` selected),
    started :data:`PARALLEL_RUNS` at a time, in test order, as soon as the first mutant test
    asks; each test waits for its own. The verdicts do not depend on the order."""
    with ThreadPoolExecutor(PARALLEL_RUNS, thread_name_prefix="mutant") as pool:
        runs = {
            m.name: pool.submit(_run_mutant, forks, m,
                                backend_env(m.backend, service_url))
            for m in _selected_mutants(request.session)
        }
        yield runs
        for run in runs.values():
            run.cancel()


# a test waits for its own run, which may start only when an earlier one ends: two runs
@pytest.mark.timeout(2 * RUN_TIMEOUT + 60)
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_the_contract_suite_rejects_the_mutant(
    mutant_runs: dict[str, Future[tuple[int, str, float]]], mutant: Mutant
) -> None:
    code, output, seconds = mutant_runs[mutant.name].result(timeout=RUN_TIMEOUT * len(MUTANTS))
    tail = output[-6000:]
    assert code != 0, f"mutant {mutant.name} SURVIVED ({mutant.bug}):\n{tail}"
    assert code == 1, f"the run of {mutant.name} crashed (exit {code}), it did not fail:\n{tail}"
    assert " failed" in output and "FAIL" in output, tail
    assert "did not finish" not in output, f"{mutant.name} hung until the timeout:\n{tail}"
    for broken in ("AttributeError", "NameError", "ImportError"):
        assert broken not in output, f"the mutant {mutant.name} itself is broken:\n{tail}"
    if mutant.expect is not None:
        assert mutant.expect in output, (
            f"{mutant.name} failed without the teaching message {mutant.expect!r}:\n{tail}"
        )
    assert seconds < RUN_TIMEOUT
