"""Listings against a model: random sequences of saves, status changes, deletes, expiries and
step-result writes, with run scans, dashboard pages and step-result scans walked in between
and checked against a reference model (docs/protocol.md, "Contexts", "Filtered pages",
"Step results" and "Conventions": scans; docs/workers.md, "Run listings after a crash";
docs/contract-suite.md, "Properties over whole families").

A hypothesis state machine drives the adapter and a dictionary of what is live side by side.
Every walk must list every live record that matches its filters (sweeper scans: at least once;
pages: exactly once, newest first) and nothing that was deleted or expired, with the row's
current status. A sweeper pass may also be walked page by page *while* the machine writes,
deletes and expires records in between: then a record live and matching for the whole pass
must still be listed, and no listed row may be gone. ``created_at`` values are drawn from a
few seconds, and every example starts with three runs created in the same microsecond, so
ties in the sort key are common; page sizes are 1 to 4.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from reactor.model.records import RunSummary, StepResultRecord
from reactor.ports.storage import Storage
from reactor_contract._support import context, step_result, teach
from reactor_contract.probe import Probe

__all__ = ["ListingsContract"]

STATUSES = ("running", "paused", "completed", "failed")
STEP_STATUSES = ("dispatched", "completed")
REACTORS = ("orders", "billing")
#: Three creation times, so rows often tie on the sort key.
CREATED = tuple(1_700_000_000.0 + k for k in range(3))
LIMITS = st.integers(min_value=1, max_value=4)
LISTING_SETTINGS = settings(
    max_examples=20,
    stateful_step_count=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_WHERE = 'docs/protocol.md, "Contexts"'
_MISTAKE = (
    "a cursor that skips the row after a deleted or re-saved one, a page limit spent on "
    "expired or filtered rows, a listing summary that outlives its run, or a tie in the "
    "sort key broken differently by the cursor and the query"
)


@dataclasses.dataclass
class Run:
    """The model of one stored run."""

    reactor: str
    status: str
    created_at: float
    kind: str  # "top", "dispatched" (an async_reactor child) or "element" (never listed)


@dataclasses.dataclass
class Pass:
    """A sweeper scan pass walked page by page between other operations."""

    statuses: tuple[str, ...] | None
    cursor: str | None = None
    listed: set[str] = dataclasses.field(default_factory=set)
    #: runs live and matching since the pass started and never touched since
    steady: set[str] = dataclasses.field(default_factory=set)


def _fail(concern: str, rule_text: str, where: str = _WHERE) -> str:
    return teach(concern, rule_text, _MISTAKE, where)


class ListingsContract:
    """Listings agree with a model after random operation sequences."""

    reactor_concern = "listings"

    #: ids created by earlier examples of the running test, deleted when an example starts
    _created: ClassVar[list[str]] = []

    @pytest.mark.obligations("O-listings-1", "O-listings-2", "O-listings-3", "O-listings-4")
    def test_listings_follow_the_model(self, storage: Storage, probe: Probe) -> None:
        created = self._created
        created.clear()

        class Listings(RuleBasedStateMachine):
            runs = Bundle("runs")

            def __init__(self) -> None:
                super().__init__()
                self.model: dict[str, Run] = {}
                self.steps: dict[tuple[str, str], str] = {}
                self.open: Pass | None = None
                self.gone: list[str] = []

            @initialize(target=runs, statuses=st.lists(st.sampled_from(STATUSES), min_size=3,
                                                       max_size=3))
            def start_with_a_tie(self, statuses: list[str]) -> Any:
                """Forget earlier examples' runs; start with three top-level runs created in
                the same microsecond (a tie on the sort key every walk must get through)."""
                for context_id in created:
                    storage.contexts.delete(context_id)
                created.clear()
                seeded = [self._save(status, REACTORS[0], CREATED[0], "top")
                          for status in statuses]
                self.walk_pages(None, None, 1, None)  # a page boundary inside the tie
                self.walk_scan(None, False, 1)
                return multiple(*seeded)

            # -- writes ------------------------------------------------------------------

            @rule(target=runs, status=st.sampled_from(STATUSES),
                  reactor=st.sampled_from(REACTORS), created_at=st.sampled_from(CREATED),
                  kind=st.sampled_from(("top", "top", "top", "dispatched", "element")))
            def save_new(self, status: str, reactor: str, created_at: float,
                         kind: str) -> str:
                return self._save(status, reactor, created_at, kind)

            def _save(self, status: str, reactor: str, created_at: float, kind: str) -> str:
                context_id = str(uuid.uuid4())
                parent = None if kind == "top" else str(uuid.uuid4())
                storage.contexts.save(context(
                    context_id, reactor=reactor, status=status, created_at=created_at,
                    parent=parent, root=parent, dispatched_child=kind == "dispatched",
                ))
                created.append(context_id)
                self.model[context_id] = Run(reactor, status, created_at, kind)
                self._touched(context_id)
                return context_id

            @rule(run=runs, status=st.sampled_from(STATUSES))
            def change_status(self, run: str, status: str) -> None:
                known = self.model.get(run)
                if known is None:
                    return
                parent = None if known.kind == "top" else f"parent-of-{run}"
                storage.contexts.save(context(
                    run, reactor=known.reactor, status=status, created_at=known.created_at,
                    updated_at=known.created_at + 1, parent=parent, root=parent,
                    dispatched_child=known.kind == "dispatched",
                ))
                known.status = status
                self._touched(run)

            @rule(run=consumes(runs))
            def delete(self, run: str) -> None:
                storage.contexts.delete(run)
                self.model.pop(run, None)
                self.gone.append(run)
                self._touched(run)

            @rule(run=consumes(runs))
            def expire(self, run: str) -> None:
                if run in self.model:
                    probe.expire("context", run)
                    del self.model[run]
                    self.gone.append(run)
                self._touched(run)

            @rule(run=runs, step=st.sampled_from(("charge", "ship", "charge:ship")),
                  status=st.sampled_from(STEP_STATUSES))
            def put_step(self, run: str, step: str, status: str) -> None:
                storage.step_results.put(step_result(run, step, status=status))
                self.steps[(run, step)] = status

            @rule(run=runs, step=st.sampled_from(("charge", "ship", "charge:ship")))
            def expire_step(self, run: str, step: str) -> None:
                if (run, step) in self.steps:
                    probe.expire("step_result", f"{run}:{step}")
                    del self.steps[(run, step)]

            # -- a sweeper pass walked between writes --------------------------------------

            # No preconditions: whether a pass is open depends on the adapter's cursors (a page
            # may end with a non-None cursor and no rows), so a precondition on it would make
            # hypothesis draw differently when it replays a case (FlakyStrategyDefinition on a
            # slow server); a rule that does not apply does nothing instead.
            @rule(statuses=st.none() | st.sets(st.sampled_from(STATUSES), min_size=1))
            def open_pass(self, statuses: set[str] | None) -> None:
                if self.open is not None:
                    return  # a pass is open: it goes on
                chosen = None if statuses is None else tuple(sorted(statuses))
                self.open = Pass(chosen, steady={
                    cid for cid, run in self.model.items()
                    if run.kind == "top" and (chosen is None or run.status in chosen)
                })

            @rule(limit=LIMITS)
            def next_page(self, limit: int) -> None:
                current = self.open
                if current is None:
                    return  # no pass open
                page = storage.contexts.scan(statuses=current.statuses, limit=limit,
                                             cursor=current.cursor)
                self._check_rows("contexts.scan", page, current.statuses, dispatched=False)
                current.listed.update(row.context_id for row in page)
                current.cursor = page.next_cursor
                if current.cursor is None:
                    missed = current.steady - current.listed
                    assert not missed, _fail(
                        "listings",
                        f"a sweeper pass (statuses={current.statuses}) missed runs live and "
                        f"matching for the whole pass, untouched meanwhile: {sorted(missed)}",
                        'docs/protocol.md, "Conventions"',
                    )
                    self.open = None

            # -- whole walks ----------------------------------------------------------------

            @rule(statuses=st.none() | st.sets(st.sampled_from(STATUSES), min_size=1),
                  dispatched=st.booleans(), limit=LIMITS)
            def walk_scan(self, statuses: set[str] | None, dispatched: bool,
                          limit: int) -> None:
                chosen = None if statuses is None else tuple(sorted(statuses))
                listed: set[str] = set()
                for page in _pages(lambda cursor: storage.contexts.scan(
                        statuses=chosen, limit=limit, include_dispatched_children=dispatched,
                        cursor=cursor)):
                    self._check_rows("contexts.scan", page, chosen, dispatched=dispatched)
                    listed.update(row.context_id for row in page)
                expected = self._matching(chosen, dispatched)
                assert listed == expected, _fail(
                    "listings",
                    f"a whole scan (statuses={chosen}, dispatched children={dispatched}, "
                    f"limit={limit}) lists every live matching run: missing "
                    f"{sorted(expected - listed)}, extra {sorted(listed - expected)}",
                )

            @rule(statuses=st.none() | st.sets(st.sampled_from(STATUSES), min_size=1),
                  reactor=st.none() | st.sampled_from(REACTORS), limit=LIMITS,
                  window=st.none() | st.tuples(st.sampled_from(CREATED),
                                               st.sampled_from(CREATED)))
            def walk_pages(self, statuses: set[str] | None, reactor: str | None, limit: int,
                           window: tuple[float, float] | None) -> None:
                chosen = None if statuses is None else tuple(sorted(statuses))
                start, end = (None, None) if window is None else (min(window), max(window))
                rows: list[RunSummary] = []
                cursor: str | None = None
                for _ in range(1000):
                    page = storage.contexts.page(cursor=cursor, limit=limit, statuses=chosen,
                                                 reactor=reactor, created_from=start,
                                                 created_to=end)
                    rows.extend(page.runs)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                ids = [row.context_id for row in rows]
                self._check_rows("contexts.page", rows, chosen, dispatched=False)
                expected = {
                    cid for cid in self._matching(chosen, False)
                    if (reactor is None or self.model[cid].reactor == reactor)
                    and (start is None or self.model[cid].created_at >= start)
                    and (end is None or self.model[cid].created_at < end)
                }
                assert len(ids) == len(set(ids)) and set(ids) == expected, _fail(
                    "listings",
                    f"pages (statuses={chosen}, reactor={reactor!r}, created in "
                    f"[{start}, {end}), limit={limit}) list every live matching top-level run "
                    f"exactly once: missing {sorted(expected - set(ids))}, extra "
                    f"{sorted(set(ids) - expected)}, repeated "
                    f"{sorted({i for i in ids if ids.count(i) > 1})}",
                    'docs/protocol.md, "Filtered pages"',
                )
                created_order = [row.created_at for row in rows]
                assert created_order == sorted(created_order, reverse=True), _fail(
                    "listings", f"pages list runs newest first, got {created_order}",
                    'docs/protocol.md, "Filtered pages"',
                )

            @rule(status=st.none() | st.sampled_from(STEP_STATUSES), limit=LIMITS)
            def walk_steps(self, status: str | None, limit: int) -> None:
                listed: set[tuple[str, str]] = set()
                for page in _pages(lambda cursor: storage.step_results.scan(
                        status=status, limit=limit, cursor=cursor)):
                    for record in page:
                        key = (record.context_id, record.step_name)
                        if record.context_id not in created and key not in self.steps:
                            continue  # another example's record (contexts are purged only)
                        self._check_step(record, status)
                        listed.add(key)
                expected = {key for key, got in self.steps.items()
                            if status is None or got == status}
                assert expected <= listed, _fail(
                    "listings",
                    f"a step-result scan (status={status}, limit={limit}) lists every live "
                    f"matching record: missing {sorted(expected - listed)}",
                    'docs/protocol.md, "Step results"',
                )

            # -- helpers --------------------------------------------------------------------

            def _touched(self, context_id: str) -> None:
                if self.open is not None:
                    self.open.steady.discard(context_id)

            def _matching(self, statuses: tuple[str, ...] | None, dispatched: bool) -> set[str]:
                kinds = ("top", "dispatched") if dispatched else ("top",)
                return {cid for cid, run in self.model.items()
                        if run.kind in kinds and (statuses is None or run.status in statuses)}

            def _check_rows(self, where: str, rows: Any, statuses: tuple[str, ...] | None,
                            *, dispatched: bool) -> None:
                for row in rows:
                    known = self.model.get(row.context_id)
                    assert known is not None, _fail(
                        "listings",
                        f"{where} listed run {row.context_id}, which was deleted or expired "
                        "(or never a run of this test)",
                        'docs/workers.md, "Run listings after a crash"',
                    )
                    allowed = ("top", "dispatched") if dispatched else ("top",)
                    assert known.kind in allowed, _fail(
                        "listings",
                        f"{where} listed run {row.context_id}, a child of kind {known.kind} "
                        f"(dispatched children requested: {dispatched})",
                    )
                    assert row.status == known.status, _fail(
                        "listings",
                        f"{where} listed run {row.context_id} as {row.status!r}; it is "
                        f"{known.status!r}",
                        'docs/workers.md, "Run listings after a crash"',
                    )
                    assert statuses is None or row.status in statuses, _fail(
                        "listings", f"{where} listed a {row.status!r} run under {statuses}",
                    )

            def _check_step(self, record: StepResultRecord, status: str | None) -> None:
                key = (record.context_id, record.step_name)
                assert key in self.steps and self.steps[key] == record.status, _fail(
                    "listings",
                    f"a step-result scan listed {key} as {record.status!r}; the model has "
                    f"{self.steps.get(key, 'nothing (expired)')!r}",
                    'docs/protocol.md, "Step results"',
                )
                assert status is None or record.status == status, _fail(
                    "listings", f"a step-result scan for {status!r} listed {record.status!r}",
                    'docs/protocol.md, "Step results"',
                )

            @invariant()
            def runs_load_as_modelled(self) -> None:
                for context_id, run in list(self.model.items())[-3:]:
                    loaded = storage.contexts.load(context_id)
                    assert loaded is not None and loaded.status == run.status, _fail(
                        "listings",
                        f"run {context_id} loads as "
                        f"{None if loaded is None else loaded.status!r}; the model has "
                        f"{run.status!r}",
                    )
                for context_id in self.gone[-3:]:
                    assert storage.contexts.load(context_id) is None, _fail(
                        "listings", f"run {context_id} was deleted or expired but still loads",
                        'docs/protocol.md, "Conventions"',
                    )

        run_state_machine_as_test(Listings, settings=LISTING_SETTINGS)


def _pages(fetch: Any) -> Iterator[Any]:
    """Every page of a keyset-paged scan, from the start to ``next_cursor is None`` (at most
    1,000 pages: a cursor that never ends fails the walk)."""
    cursor: str | None = None
    for _ in range(1000):
        page = fetch(cursor)
        yield page
        cursor = page.next_cursor
        if cursor is None:
            return
    pytest.fail("listings: a scan's next_cursor never came back None within 1,000 pages")


class TestListings(ListingsContract):
    """The listing model against ``--reactor-storage``."""
