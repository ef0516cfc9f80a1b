"""The pytest plugin of the contract suite (entry point ``pytest11: reactor_contract``).

Run the suite against an adapter with::

    pytest --pyargs reactor_contract --reactor-storage=URL --reactor-router=URL

The plugin is loaded by every pytest run in an environment where reactor is installed, so it is
inert unless one of its options is given: it only adds the options and three passive fixtures.
Without ``--reactor-storage`` (``--reactor-router``) the storage (router) fixtures skip with the
reason ``"no --reactor-storage given"`` (``"no --reactor-router given"``).

Fixtures (function-scoped, a fresh namespace per test):

* ``storage`` -- a :class:`reactor.ports.Storage` built with
  :func:`reactor.config.storage_from_url` from the URL plus a unique ``prefix`` query parameter
  (adapters must accept ``prefix`` and namespace every record with it; in-process adapters may
  ignore it because each test gets a new object anyway);
* ``probe`` -- the adapter's :class:`reactor_contract.probe.Probe` (entry point group
  ``reactor.probes``);
* ``router`` -- a :class:`reactor.ports.Router` from ``--reactor-router`` plus ``prefix`` and,
  unless the URL sets it, ``visibility_timeout=1``;
* ``router_probe`` -- the router's :class:`reactor_contract.probe.RouterProbe`
  (``reactor.router_probes``).

At the end of a run with the options, a conformance table (one row per concern) is printed,
and every test is bounded by ``--reactor-test-timeout`` seconds (default 60;
:mod:`reactor_contract._timeout`), so a broken adapter fails instead of hanging the run. The
``documents`` and ``surface`` tests run first (:data:`RUN_FIRST`), and after each test the
namespaces it opened are emptied through the probes (:class:`NamespaceJanitor`;
docs/contract-suite.md, "Cleanup: nothing left behind").
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl, quote, urlsplit

import pytest

from reactor.ports.router import Router
from reactor.ports.storage import Storage
from reactor_contract import obligation_marks
from reactor_contract._support import CONTEXT_TTL
from reactor_contract._timeout import DEFAULT_TEST_TIMEOUT, ContractTimeout
from reactor_contract.obligation_marks import ObligationCoverage
from reactor_contract.probe import Probe, RouterProbe, load_probe, load_router_probe

__all__ = [
    "CLEANUP",
    "CONCERN_ORDER",
    "IN_PROCESS_NO_DRIVER",
    "MANDATORY_CONCERNS",
    "NOT_APPLICABLE",
    "NOT_APPLICABLE_CONCERNS",
    "NOT_RUN",
    "NO_APPEND",
    "NO_MAP_INSPECTION",
    "NO_ROLLBACK_INSPECTION",
    "NO_SEMAPHORE_RESET",
    "NO_SIZE_LIMIT",
    "RUN_FIRST",
    "SERVER_CLOCK",
    "STRONGER",
    "STRONGER_THAN_PREMISE",
    "UNCARRIABLE_BODY",
    "UNDECLARED",
    "UNDECLARED_OPERATIONS",
    "CleanupTally",
    "ConformanceReport",
    "NamespaceJanitor",
    "add_query",
    "forget_namespaces",
    "is_stronger",
    "open_router",
    "open_storage",
    "purge_live",
    "router_url_for_test",
    "storage_url_for_test",
]

#: Rows of the conformance table, in print order (``reactor_concern`` of each contract class).
CONCERN_ORDER: tuple[str, ...] = (
    "surface",
    "documents",
    "contexts",
    "step_results",
    "maps",
    "map_rollbacks",
    "claims",
    "locks",
    "semaphores",
    "rate_limits",
    "periods",
    "ordered_locks",
    "leases",
    "signals",
    "step_transactions",
    "schedules",
    "routers",
    "dead_letters",
    "model",
    "concurrency",
    "sweeps",
    "cleanup",
)

T = TypeVar("T")

#: Skip reasons starting with this mark a concern that does not apply to the adapter (verdict
#: ``n/a``, e.g. ``documents`` on a storage not built on a ``DocumentStore``), not a gap.
NOT_APPLICABLE = "not applicable:"

#: The reason category of a test skipped because the adapter is *stronger* than the test's
#: premise (the premise cannot arise on it: no size limit to exceed, no client clock to skew, no
#: producer able to send the body). Such a skip is not a gap: the row stays ``ok`` and the run
#: ``certified`` (docs/contract-suite.md, "Verdicts"). Only the suite's own reasons of this
#: category count, in the concerns :data:`STRONGER_THAN_PREMISE` names.
STRONGER = f"{NOT_APPLICABLE} stronger than the premise:"
#: A storage that declares no document size limit: no context can be too large to save.
NO_SIZE_LIMIT = (
    f"{STRONGER} no document size limit (Capabilities.max_document_bytes is None), so no "
    "document is too large"
)
#: A storage whose clock is the server's: no client's clock can be skewed against it.
SERVER_CLOCK = (
    f"{STRONGER} server clock (Capabilities.clock is 'server'), which clients cannot skew"
)
#: A transport that cannot carry a poison body at all (SQS: non-UTF-8 bytes), so no producer
#: can send it; the probe's ``UnsupportedBody`` message follows the colon.
UNCARRIABLE_BODY = f"{STRONGER} the transport cannot carry this body, so no producer can send it:"
#: An adapter that declares it keeps its data in this process (``InProcess``): it has no driver
#: whose requests could fail.
IN_PROCESS_NO_DRIVER = (
    f"{STRONGER} the adapter keeps its data in this process (InProcess), so it has no driver "
    "whose requests could fail"
)

#: The reason category of a test of an optional storage operation (a runtime-checkable
#: protocol of ``reactor.ports.capabilities`` the engine never calls or can do without) that
#: the adapter does not declare: not a gap, the row stays ``ok`` (docs/contract-suite.md,
#: "Verdicts"); :mod:`reactor_contract.optional_operations` skips with the reasons below.
UNDECLARED = f"{NOT_APPLICABLE} the adapter does not declare"

#: The skip reason of a test of incremental checkpoints on a store without them.
NO_APPEND = (
    f"{UNDECLARED} AppendsContexts (incremental checkpoints are optional: the engine saves "
    "whole contexts on a store without them)"
)
#: The skip reason of a test of the map reads the engine never calls.
NO_MAP_INSPECTION = (
    f"{UNDECLARED} InspectsMaps (counter, element_ids, element_id are optional: the engine "
    "never calls them)"
)
#: The skip reason of a test of the rollback progress reads the engine never calls.
NO_ROLLBACK_INSPECTION = (
    f"{UNDECLARED} InspectsMapRollbacks (indexes_seen, summary are optional: the engine never "
    "calls them)"
)
#: The skip reason of a test of the operators' semaphore reset.
NO_SEMAPHORE_RESET = (
    f"{UNDECLARED} ResetsSemaphores (reset is optional: the engine never calls it)"
)


#: ``{concern: reasons}``: the skips of undeclared optional operations the suite issues, by
#: concern; the same words anywhere else (an adapter's own skip) are a gap.
UNDECLARED_OPERATIONS: dict[str, tuple[str, ...]] = {
    "contexts": (NO_APPEND,),
    "driver_faults": (NO_APPEND,),
    "declarations": (NO_APPEND,),
    "maps": (NO_MAP_INSPECTION,),
    "concurrency": (NO_MAP_INSPECTION,),
    "map_rollbacks": (NO_ROLLBACK_INSPECTION,),
    "semaphores": (NO_SEMAPHORE_RESET,),
}

#: ``{concern: reasons}``: the stronger-than-the-premise skips the suite issues, by concern.
#: A skip counts as "stronger" only when its reason starts with one listed for its concern;
#: the same words anywhere else (an adapter's own skip) are a gap, or a failure in a mandatory
#: concern.
STRONGER_THAN_PREMISE: dict[str, tuple[str, ...]] = {
    "documents": (NO_SIZE_LIMIT,),
    "contexts": (NO_SIZE_LIMIT,),
    "rate_limits": (SERVER_CLOCK,),
    "routers": (UNCARRIABLE_BODY,),
    "dead_letters": (UNCARRIABLE_BODY,),
    "driver_faults": (IN_PROCESS_NO_DRIVER,),
}

#: Concerns collected first, in this order, whatever the module order: the ``DocumentStore``
#: primitive every generic sub-store rests on, then the storage's surface, so ``-x`` stops at
#: the root cause instead of at a symptom in a higher concern (docs/contract-suite.md).
RUN_FIRST: tuple[str, ...] = ("documents", "surface")

#: Concerns every adapter must pass: everything the engine relies on. A skip in one is a
#: failure (docs/contract-suite.md, "Verdicts"), unless it is one of the suite's own
#: :data:`STRONGER_THAN_PREMISE` skips. Optional: ``signals`` (a declared capability),
#: ``documents`` (only storages built on a ``DocumentStore``), the router rows ``routers`` and
#: ``dead_letters`` (a transport may not carry every body; dead-letter administration is a
#: capability) and ``cleanup`` (a probe that can empty its namespace).
MANDATORY_CONCERNS: frozenset[str] = frozenset(
    {
        "surface", "contexts", "step_results", "maps", "map_rollbacks", "claims", "locks",
        "semaphores", "rate_limits", "periods", "ordered_locks", "leases", "model",
        "concurrency", "sweeps", "keys", "listings", "rounding",
    }
)


def is_stronger(concern: str, reason: str) -> bool:
    """Whether a skip of a ``concern`` test with ``reason`` is one of the suite's own
    "stronger than the premise" skips (:data:`STRONGER_THAN_PREMISE`): not a gap.

    Args:
        concern: the conformance-table row.
        reason: the skip reason, without pytest's ``"Skipped: "``.
    """
    starts = STRONGER_THAN_PREMISE.get(concern, ())
    return bool(starts) and reason.startswith(starts)


#: The only concerns that may be ``n/a``: the suite itself decides they do not apply (an
#: adapter's own "not applicable" skip anywhere else is a gap, or a failure when mandatory).
NOT_APPLICABLE_CONCERNS: frozenset[str] = frozenset(
    {"documents", "step_transactions", "schedules"}
)

#: Skip reasons of a run without the storage or router option (the row is "not run").
NOT_RUN: frozenset[str] = frozenset({"no --reactor-storage given", "no --reactor-router given"})

_VERDICTS = 'docs/contract-suite.md, "Verdicts"'

#: Default visibility timeout (seconds) the suite asks a router for, so redelivery is quick.
TEST_VISIBILITY_TIMEOUT = "1"


def add_query(url: str, **params: str) -> str:
    """Append query parameters to a backend URL, keeping ``scheme://`` intact.

    ``urllib.parse.urlunsplit`` drops the ``//`` of URLs without a host (``memory://``), so this
    edits the text. A parameter already present is left alone (the user's value wins).
    """
    base, _, fragment = url.partition("#")
    present = {k for k, _ in parse_qsl(urlsplit(base).query, keep_blank_values=True)}
    extra = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items() if k not in present)
    if not extra:
        return url
    joined = f"{base}{'&' if '?' in base else '?'}{extra}"
    return f"{joined}#{fragment}" if fragment else joined


def _prefix(url: str, token: str) -> str:
    query = dict(parse_qsl(urlsplit(url.partition("#")[0]).query, keep_blank_values=True))
    return f"{query['prefix']}-{token}" if query.get("prefix") else token


def _with_prefix(url: str, token: str) -> str:
    base, _, fragment = url.partition("#")
    parts = urlsplit(base)
    kept = [
        f"{k}={quote(v, safe='')}"
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k != "prefix"
    ]
    stem = base.split("?", 1)[0]
    query = "&".join([*kept, f"prefix={quote(_prefix(url, token), safe='')}"])
    joined = f"{stem}?{query}"
    return f"{joined}#{fragment}" if fragment else joined


def storage_url_for_test(url: str, token: str) -> str:
    """The storage URL one test uses: ``url`` with a per-test ``prefix`` (suffixed if set)."""
    return _with_prefix(url, token)


def router_url_for_test(url: str, token: str) -> str:
    """The router URL one test uses: per-test ``prefix`` and ``visibility_timeout=1`` default."""
    return add_query(_with_prefix(url, token), visibility_timeout=TEST_VISIBILITY_TIMEOUT)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--reactor-storage`` and ``--reactor-router`` (inert when absent)."""
    group = parser.getgroup("reactor-contract", "reactor adapter contract suite")
    group.addoption(
        "--reactor-storage",
        dest="reactor_storage",
        metavar="URL",
        default=None,
        help="storage URL to run the reactor contract suite against (e.g. memory://)",
    )
    group.addoption(
        "--reactor-router",
        dest="reactor_router",
        metavar="URL",
        default=None,
        help="router URL to run the reactor contract suite against (e.g. local://)",
    )
    group.addoption(
        "--reactor-json",
        dest="reactor_json",
        metavar="PATH",
        default=None,
        help="write the conformance table and the verdict to PATH as JSON (for CI)",
    )
    group.addoption(
        "--reactor-obligations",
        dest="reactor_obligations",
        action="store_true",
        default=False,
        help="after collection, print which tests check each obligation of docs/obligations.md "
        "(use with --collect-only); fails when one is checked by no test",
    )
    group.addoption(
        "--reactor-test-timeout",
        dest="reactor_test_timeout",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_TEST_TIMEOUT,
        help="fail a contract test that takes longer than this, setup and teardown included "
        f"(default {DEFAULT_TEST_TIMEOUT:g}; 0 disables it)",
    )


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("reactor_storage") or config.getoption("reactor_router"))


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``obligations`` marker (and its coverage table for
    ``--reactor-obligations``); register the conformance table and the per-test timeout, only
    when the suite's options are given."""
    obligation_marks.register(config)
    # Hypothesis fails a test whose strategies seem to use the global random state; a driver's
    # background thread (a connection pool's jitter) moves it while an example is drawn, which
    # is not the strategy's doing (the suite's strategies draw from hypothesis only).
    config.addinivalue_line(
        "filterwarnings",
        "ignore:Do not use the `random` module inside strategies"
        ":hypothesis.errors.HypothesisDeprecationWarning",
    )
    if config.getoption("reactor_obligations"):
        config.pluginmanager.register(ObligationCoverage(), "reactor-contract-obligations")
    if _enabled(config):
        config.pluginmanager.register(ConformanceReport(config), "reactor-contract-conformance")
        timeout = ContractTimeout(config.getoption("reactor_test_timeout"))
        config.pluginmanager.register(timeout, "reactor-contract-timeout")
        config.pluginmanager.register(NamespaceJanitor(), "reactor-contract-cleanup")
        _import_adapters(config)


def _import_adapters(config: pytest.Config) -> None:
    """Import the adapters under test before any test's timer starts: an adapter module that
    takes seconds to import (boto3, pymongo) is slow, not stuck. An unknown scheme or missing
    dependency is left for the fixtures, which report it against the tests it fails."""
    from reactor.config import load_adapter_factories
    from reactor.errors import ConfigurationError

    try:
        load_adapter_factories(config.getoption("reactor_storage"),
                               config.getoption("reactor_router"))
    except ConfigurationError:
        pass


@dataclass
class _Row:
    """Counts of one concern: ``skipped`` are the skips that are not ``not_applicable`` (gaps,
    "not run", or mistakes); ``reasons`` and ``na_reasons`` count each reason of either kind."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    not_applicable: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    na_reasons: dict[str, int] = field(default_factory=dict)


def _not_applicable(concern: str, reason: str | None) -> bool:
    """Whether a skip is the suite's own "does not apply" (a whole ``n/a`` concern, or a test
    whose premise the adapter is stronger than): never a gap."""
    if not reason:
        return False
    if concern in NOT_APPLICABLE_CONCERNS and reason.startswith(NOT_APPLICABLE):
        return True
    if reason in UNDECLARED_OPERATIONS.get(concern, ()):
        return True
    return is_stronger(concern, reason)


class ConformanceReport:
    """Outcomes of contract tests per concern, printed as a table at the end of the run.

    Registered as a plugin object only when ``--reactor-storage``/``--reactor-router`` is given.
    A test belongs to a concern when its class (or module) sets ``reactor_concern``.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.concern_of: dict[str, str] = {}
        self.outcome: dict[str, tuple[str, str | None]] = {}
        self._deselected = False

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Refuse obligation ids the catalogue lacks; remember which collected tests belong to
        which concern, and move the :data:`RUN_FIRST` concerns to the front (a stable sort:
        the rest keep their order)."""
        obligation_marks.validate(items)
        for item in items:
            cls = getattr(item, "cls", None)
            concern = getattr(cls, "reactor_concern", None) if cls is not None else None
            if concern is None:
                concern = getattr(getattr(item, "module", None), "reactor_concern", None)
            if isinstance(concern, str):
                self.concern_of[item.nodeid] = concern
        first = {name: i for i, name in enumerate(RUN_FIRST)}
        items.sort(key=lambda item: first.get(self.concern_of.get(item.nodeid, ""), len(first)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Fold one phase report of a contract test into its final outcome."""
        if report.nodeid not in self.concern_of:
            return
        previous = self.outcome.get(report.nodeid)
        if previous is not None and previous[0] == "failed":
            return
        if report.failed:
            self.outcome[report.nodeid] = ("failed", None)
        elif report.skipped:
            reason = None
            if isinstance(report.longrepr, tuple):
                reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            self.outcome[report.nodeid] = ("skipped", reason)
        elif report.when == "call":
            self.outcome[report.nodeid] = ("passed", None)

    def rows(self) -> dict[str, _Row]:
        """``{concern: counts}`` in :data:`CONCERN_ORDER` (unknown concerns last)."""
        order = {name: i for i, name in enumerate(CONCERN_ORDER)}
        ran = {self.concern_of[nodeid] for nodeid in self.outcome}
        concerns = sorted(ran, key=lambda c: (order.get(c, len(order)), c))
        rows = {concern: _Row() for concern in concerns}
        for nodeid, (outcome, reason) in self.outcome.items():
            concern = self.concern_of[nodeid]
            row = rows[concern]
            if outcome == "passed":
                row.passed += 1
            elif outcome == "failed":
                row.failed += 1
            elif reason and _not_applicable(concern, reason):
                row.not_applicable += 1
                row.na_reasons[reason] = row.na_reasons.get(reason, 0) + 1
            else:
                row.skipped += 1
                if reason:
                    row.reasons[reason] = row.reasons.get(reason, 0) + 1
        return rows

    def row_verdicts(self) -> dict[str, tuple[str, list[str]]]:
        """``{concern: (verdict, problems)}``: ``ok`` (passed, apart from tests the adapter is
        stronger than), ``gaps`` (declared skips), ``n/a`` (nothing applied), ``not run`` (its
        option was not given) or ``FAIL`` (a failure, or a skip in a mandatory concern, each
        problem a teaching line; docs/contract-suite.md, "Verdicts")."""
        out: dict[str, tuple[str, list[str]]] = {}
        for concern, row in self.rows().items():
            problems: list[str] = []
            reasons = list(row.reasons)
            if row.skipped > sum(row.reasons.values()):
                reasons.append("(no reason given)")
            if concern in MANDATORY_CONCERNS:
                for reason in reasons:
                    if reason in NOT_RUN:
                        continue
                    problems.append(
                        f"{concern}: a mandatory concern cannot be skipped, and "
                        f"{row.reasons.get(reason, row.skipped)} test(s) skipped with "
                        f"{reason!r} (likely mistake: declaring a capability absent or "
                        "skipping in a probe or a subclass; every concern but signals, "
                        "documents, routers, dead_letters and cleanup is required of every "
                        f"adapter; see {_VERDICTS})"
                    )
            if row.failed or problems:
                verdict = "FAIL"
            elif not row.skipped:
                verdict = "n/a" if row.not_applicable and not row.passed else "ok"
            elif all(r in NOT_RUN for r in reasons):
                verdict = "ok" if row.passed else "not run"
            else:
                verdict = "gaps"
            out[concern] = (verdict, problems)
        return out

    def verdict(self) -> dict[str, Any]:
        """The run's verdict as plain data (what ``--reactor-json`` writes).

        ``verdict`` is ``"certified"`` (every concern that ran passed; the only skips are
        ``not_applicable``: a concern that does not apply, or a test whose premise the adapter
        is stronger than), ``"certified with declared gaps"`` (optional capabilities missing,
        listed in ``gaps``) or ``"failed"`` (``failures`` says why). ``not_applicable`` lists
        the skips that are not gaps.
        """
        rows, verdicts = self.rows(), self.row_verdicts()
        failures = [p for _, problems in verdicts.values() for p in problems]
        failures += [f"{c}: {r.failed} test(s) failed" for c, r in rows.items() if r.failed]
        if self._full_run():
            ran = set(rows)
            storage_given = bool(self.config.getoption("reactor_storage"))
            for concern in sorted(MANDATORY_CONCERNS - ran) if storage_given else ():
                failures.append(
                    f"{concern}: the mandatory concern did not run at all (likely mistake: "
                    f"a contract module skipped or deselected; see {_VERDICTS})"
                )
        gaps = [
            f"{concern}: {reason} ({_tests(count)})"
            for concern, row in rows.items()
            if verdicts[concern][0] == "gaps"
            for reason, count in sorted(row.reasons.items())
            if reason not in NOT_RUN
        ]
        not_applicable = [
            f"{concern}: {reason} ({_tests(count)})"
            for concern, row in rows.items()
            for reason, count in sorted(row.na_reasons.items())
        ]
        status = "failed" if failures else ("certified with declared gaps" if gaps else
                                            "certified")
        return {
            "storage": self.config.getoption("reactor_storage"),
            "router": self.config.getoption("reactor_router"),
            "verdict": status,
            "failures": failures,
            "gaps": gaps,
            "not_applicable": not_applicable,
            "concerns": {
                concern: {
                    "passed": row.passed,
                    "failed": row.failed,
                    "skipped": row.skipped,
                    "not_applicable": row.not_applicable,
                    "verdict": verdicts[concern][0],
                    "mandatory": concern in MANDATORY_CONCERNS,
                    "skip_reasons": dict(sorted(row.reasons.items())),
                    "not_applicable_reasons": dict(sorted(row.na_reasons.items())),
                }
                for concern, row in rows.items()
            },
            "cleanup": {
                "namespaces_purged": CLEANUP.purged,
                "records_deleted": CLEANUP.records,
                "namespaces_left_unpurged": CLEANUP.unsupported + len(CLEANUP.errors),
                "errors": list(CLEANUP.errors),
            },
            "totals": {
                "passed": sum(r.passed for r in rows.values()),
                "failed": sum(r.failed for r in rows.values()),
                "skipped": sum(r.skipped for r in rows.values()),
                "not_applicable": sum(r.not_applicable for r in rows.values()),
            },
        }

    def _full_run(self) -> bool:
        """Whether the whole suite was asked for (``--pyargs reactor_contract``, no ``-k``, no
        deselection), so a mandatory concern missing from the table is a failure."""
        args = [str(a) for a in self.config.args]
        return (
            "reactor_contract" in args
            and not self.config.getoption("keyword", "")
            and not self._deselected
        )

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """Remember that the run was narrowed (``-k``, ``-m``)."""
        if any(item.nodeid in self.concern_of for item in items):
            self._deselected = True

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write ``--reactor-json`` and fail the run (exit 1) when the verdict is "failed"
        although no test failed (a skipped mandatory concern)."""
        if not self.outcome:
            return
        verdict = self.verdict()
        path = self.config.getoption("reactor_json")
        if path:
            with open(path, "w", encoding="utf-8") as out:
                json.dump(verdict, out, indent=2, sort_keys=False)
                out.write("\n")
        if verdict["verdict"] == "failed" and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the table: one row per concern, passed/failed/skipped/not applicable, then the
        skip reasons (gaps apart from the not-applicable ones) and the verdict."""
        rows = self.rows()
        if not rows:
            return
        verdicts = self.row_verdicts()
        tr = terminalreporter
        tr.write_sep("=", "reactor contract conformance")
        tr.write_line(f"storage: {self.config.getoption('reactor_storage') or '-'}")
        tr.write_line(f"router:  {self.config.getoption('reactor_router') or '-'}")
        tr.write_line(f"{'concern':<16}{'passed':>8}{'failed':>8}{'skipped':>9}{'n/a':>6}  verdict")
        total = _Row()
        for concern, row in rows.items():
            verdict = verdicts[concern][0]
            tr.write_line(
                f"{concern:<16}{row.passed:>8}{row.failed:>8}{row.skipped:>9}"
                f"{row.not_applicable:>6}  {verdict}",
                red=verdict == "FAIL",
                green=verdict == "ok",
            )
            total.passed += row.passed
            total.failed += row.failed
            total.skipped += row.skipped
            total.not_applicable += row.not_applicable
        tr.write_line(f"{'total':<16}{total.passed:>8}{total.failed:>8}{total.skipped:>9}"
                      f"{total.not_applicable:>6}")
        reasons = [
            (concern, reason, count)
            for concern, row in rows.items()
            for reason, count in sorted(row.reasons.items())
        ]
        if reasons:
            tr.write_line("skipped, with reasons:")
            for concern, reason, count in reasons:
                tr.write_line(f"  {concern}: {reason} ({_tests(count)})")
        summary = self.verdict()
        if summary["not_applicable"]:
            tr.write_line("not applicable (the concern does not apply, or the adapter is "
                          "stronger than the test's premise; not gaps):")
            for line in summary["not_applicable"]:
                tr.write_line(f"  {line}")
        left = CLEANUP.unsupported + len(CLEANUP.errors)
        tr.write_line(
            f"cleanup: {CLEANUP.purged} namespaces emptied ({CLEANUP.records} records deleted)"
            + (f", {left} left behind (see the cleanup row)" if left else ", nothing left behind"),
            yellow=bool(left),
        )
        for line in CLEANUP.errors[:10]:
            tr.write_line(f"  {line}", yellow=True)
        if summary["verdict"] == "failed":
            tr.write_line("verdict: FAILED", red=True)
            for line in summary["failures"]:
                tr.write_line(f"  {line}", red=True)
        elif summary["gaps"]:
            tr.write_line("verdict: certified with declared gaps:", yellow=True)
            for line in summary["gaps"]:
                tr.write_line(f"  {line}")
        else:
            tr.write_line("verdict: certified", green=True)


def _tests(count: int) -> str:
    return f"{count} test{'s' if count != 1 else ''}"


# -- cleanup: nothing left behind ------------------------------------------------------------

#: ``{prefixed URL: (kind, URL as given, id of the object)}`` of the namespaces opened
#: (:func:`open_storage`, :func:`open_router`) and not purged yet; :class:`NamespaceJanitor`
#: empties them after each test (docs/contract-suite.md, "Cleanup: nothing left behind").
_OPENED: dict[str, tuple[str, str, int]] = {}


@dataclass
class CleanupTally:
    """What the run's cleanup did: namespaces purged, records deleted, namespaces a probe
    could not purge (no :class:`reactor_contract.probe.CleanupProbe`), and errors."""

    purged: int = 0
    records: int = 0
    unsupported: int = 0
    errors: list[str] = field(default_factory=list)


#: The cleanup of this process's run (printed under the conformance table).
CLEANUP = CleanupTally()


def _purge(kind: str, url: str, built: object) -> bool:
    """Purge ``built``'s namespace through its probe; ``False`` when the probe cannot."""
    from reactor_contract.probe import CleanupProbe

    probe: object = (
        load_probe(url, cast(Storage, built)) if kind == "storage"
        else load_router_probe(url, cast(Router, built))
    )
    deleted = probe.purge_namespace() if isinstance(probe, CleanupProbe) else None
    if deleted is None:
        CLEANUP.unsupported += 1
        return False
    CLEANUP.purged += 1
    CLEANUP.records += deleted
    return True


def purge_live(kind: str, url: str, built: Storage | Router) -> None:
    """Empty the namespace of a storage or router the suite opened, through its probe, while
    it is still open; forget the namespace. A failure (e.g. the test closed it) leaves the
    namespace to :class:`NamespaceJanitor`, which opens it again after the test.

    Args:
        kind: ``"storage"`` or ``"router"``.
        url: the URL the suite was given (``--reactor-storage`` / ``--reactor-router``).
        built: what :func:`open_storage` / :func:`open_router` returned for it.
    """
    for prefixed, (opened_kind, opened_url, opened_id) in list(_OPENED.items()):
        if (opened_kind, opened_url, opened_id) == (kind, url, id(built)):
            try:
                _purge(kind, url, built)
            except Exception:
                return  # the janitor tries again on a fresh object
            _OPENED.pop(prefixed, None)
            return


def forget_namespaces() -> None:
    """Forget every namespace recorded by :func:`open_storage` / :func:`open_router` and not
    purged yet (a caller that empties them itself, or knows they hold nothing)."""
    _OPENED.clear()


class NamespaceJanitor:
    """A pytest plugin object: after each test (its fixtures torn down), empties every
    namespace the test opened that is still there, on a fresh storage or router of the
    namespace's URL, through the probe's :class:`reactor_contract.probe.CleanupProbe`
    (docs/contract-suite.md, "Cleanup: nothing left behind"). Errors are counted in
    :data:`CLEANUP`, never blamed on the test."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, Any]:
        """Let the test's fixtures tear down, then purge what is left."""
        try:
            return (yield)
        finally:
            self.sweep()

    def sweep(self) -> None:
        """Purge every namespace still recorded in ``_OPENED``."""
        from reactor.config import router_from_url, storage_from_url

        for prefixed, (kind, url, _) in list(_OPENED.items()):
            _OPENED.pop(prefixed, None)
            if _PREFIX_SUPPORT.get(urlsplit(url).scheme.lower()) is False:
                continue  # an in-process adapter: the namespace died with its object
            build = storage_from_url if kind == "storage" else router_from_url
            settings = _adapter_settings()
            if kind == "router":
                settings.pop("visibility_timeout", None)
            try:
                built = build(prefixed, **settings)
            except Exception as exc:
                CLEANUP.errors.append(f"{kind} {prefixed}: cannot reopen it: {exc!r}")
                continue
            try:
                _purge(kind, url, built)
            except Exception as exc:
                CLEANUP.errors.append(f"{kind} {prefixed}: purge_namespace failed: {exc!r}")
            finally:
                try:
                    built.close()
                except Exception:  # closing after a purge is best effort
                    pass


# -- fixtures --------------------------------------------------------------------------------


def _token() -> str:
    return f"rc{uuid.uuid4().hex[:10]}"


def _adapter_settings() -> dict[str, Any]:
    """The engine settings a storage factory receives, as ``reactor.configure`` passes them."""
    from reactor.config import Settings

    return Settings(context_ttl=CONTEXT_TTL).model_dump()


#: Whether a URL scheme's factory accepted the ``prefix`` parameter, learned on first use.
_PREFIX_SUPPORT: dict[str, bool] = {}


def _build(factory: Callable[..., T], url: str, prefixed_url: str, settings: dict[str, Any]) -> T:
    """Call ``factory`` with the per-test ``prefixed_url``, or ``url`` if it rejects ``prefix``.

    An in-process adapter may reject unknown URL parameters: each test gets a new object anyway,
    so the suite falls back to the plain URL once the scheme refused ``prefix`` with a
    :class:`ConfigurationError` (remembered per scheme). Any other error is raised again by the
    plain call. Adapters that keep state outside the process must accept ``prefix``.
    """
    from reactor.errors import ConfigurationError

    scheme = urlsplit(url).scheme.lower()
    if _PREFIX_SUPPORT.get(scheme) is not False:
        try:
            built = factory(prefixed_url, **settings)
        except ConfigurationError:
            if _PREFIX_SUPPORT.get(scheme):
                raise
            _PREFIX_SUPPORT[scheme] = False
        else:
            _PREFIX_SUPPORT[scheme] = True
            return built
    return factory(url, **settings)


def open_storage(url: str, token: str | None = None) -> Storage:
    """A storage of ``url`` in the namespace ``token`` (a fresh one by default), built as the
    ``storage`` fixture builds it; the caller closes it.

    Two calls with different tokens must give storages that share nothing
    (docs/contract-suite.md, "Isolation: one namespace per test").
    """
    from reactor.config import storage_from_url

    prefixed = storage_url_for_test(url, token or _token())
    built = _build(storage_from_url, url, prefixed, _adapter_settings())
    _OPENED.setdefault(prefixed, ("storage", url, id(built)))
    return built


def open_router(url: str, token: str | None = None) -> Router:
    """A router of ``url`` (1 s visibility unless set) in the namespace ``token`` (a fresh one
    by default), built as the ``router`` fixture builds it; the caller closes it."""
    from reactor.config import router_from_url

    settings = _adapter_settings()
    settings.pop("visibility_timeout", None)
    prefixed = router_url_for_test(url, token or _token())
    built = _build(router_from_url, add_query(url, visibility_timeout=TEST_VISIBILITY_TIMEOUT),
                   prefixed, settings)
    _OPENED.setdefault(prefixed, ("router", url, id(built)))
    return built


@pytest.fixture
def reactor_storage_url(request: pytest.FixtureRequest) -> str:
    """The ``--reactor-storage`` URL as given; skips the test when the option is absent."""
    url = request.config.getoption("reactor_storage")
    if not url:
        pytest.skip("no --reactor-storage given")
    return str(url)


@pytest.fixture
def storage(reactor_storage_url: str) -> Iterator[Storage]:
    """A fresh :class:`reactor.ports.Storage` in its own namespace, closed after the test."""
    built = open_storage(reactor_storage_url)
    try:
        yield built
    finally:
        try:
            purge_live("storage", reactor_storage_url, built)
        finally:
            built.close()


@pytest.fixture
def probe(reactor_storage_url: str, storage: Storage) -> Probe:
    """The adapter's backdoor :class:`reactor_contract.probe.Probe` for ``storage``."""
    return load_probe(reactor_storage_url, storage)


@pytest.fixture
def reactor_router_url(request: pytest.FixtureRequest) -> str:
    """The ``--reactor-router`` URL as given; skips the test when the option is absent."""
    url = request.config.getoption("reactor_router")
    if not url:
        pytest.skip("no --reactor-router given")
    return str(url)


@pytest.fixture
def router(reactor_router_url: str) -> Iterator[Router]:
    """A fresh :class:`reactor.ports.Router` (own queue, 1 s visibility), closed after the test."""
    built = open_router(reactor_router_url)
    try:
        yield built
    finally:
        try:
            purge_live("router", reactor_router_url, built)
        finally:
            built.close()


@pytest.fixture
def router_probe(reactor_router_url: str, router: Router) -> RouterProbe:
    """The router's backdoor :class:`reactor_contract.probe.RouterProbe`."""
    return load_router_probe(reactor_router_url, router)
