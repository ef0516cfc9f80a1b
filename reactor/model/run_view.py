"""``RunView``: the read-only view of a stored run returned by ``Reactor.find``.

Secrets never appear (docs/security.md, "What each view shows"): a view is built from the
context as stored, without decrypting anything, and masked with
:mod:`reactor.model.masking` — inputs named in the stored ``redacted`` list and every sealed
value read ``"[REDACTED]"``, trace entries carry no arguments, and ``Failure.inputs`` is
masked too.

A view also names the element runs of the map steps its run started (``maps``, and
:meth:`RunView.map_elements` to page through them: docs/fan_out.md, "Listing a map's
elements"); the reading itself is the storage-side :func:`reactor.runs.map_element_page`, which
the view is given when :meth:`reactor.Reactor.find` builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from reactor.errors import MapElementsArgumentError
from reactor.model.context import Context
from reactor.model.engine_state import (
    CancelRequest,
    DefinitionStamp,
    FailureHold,
    ForkOrigin,
    PendingInterrupt,
    PendingSleep,
    Suspension,
    VersionHold,
)
from reactor.model.masking import mask_value
from reactor.model.results import Failure
from reactor.model.run_records import MapMembership, MapRef, TraceRecord
from reactor.model.status import RunStatus

__all__ = [
    "MAP_OUTCOMES",
    "MAX_ELEMENT_PAGE",
    "ElementReader",
    "MapElement",
    "MapElementPage",
    "MapInfo",
    "MapOutcome",
    "RunView",
    "TraceEntry",
    "check_element_query",
    "map_infos",
]

MapOutcome = Literal["succeeded", "failed", "halted", "undone", "skipped", "pending"]
#: Every map element outcome, in display order (docs/fan_out.md, "Listing a map's elements"):
#: ``undone`` is an inline map's element rolled back after it completed (a fan-out map's slots
#: keep the outcome the element settled with); ``pending`` has not settled yet.
MAP_OUTCOMES: Final[tuple[MapOutcome, ...]] = (
    "succeeded", "failed", "halted", "undone", "skipped", "pending",
)
#: The most elements one page returns.
MAX_ELEMENT_PAGE: Final = 1000


@dataclass(frozen=True)
class MapInfo:
    """A map step a run started, as its stored ``map_ref`` names it (docs/protocol.md,
    "Maps").

    Attributes:
        map_id: the map's id.
        fan_out: ``True`` for a fan-out map (elements run as worker jobs; their run ids are
            derived from ``map_id`` and the index), ``False`` for an inline map.
        count: the number of elements of a fan-out map; for an inline map the elements started
            so far.
        elements: an inline map's started elements, index -> element run id (empty for a
            fan-out map).
    """

    map_id: str
    fan_out: bool
    count: int
    elements: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def of(cls, ref: MapRef) -> MapInfo:
        """The info of a loaded map reference."""
        if ref.is_fan_out:
            count = ref.count if ref.count is not None and ref.count >= 0 else 0
            return cls(map_id=ref.map_id, fan_out=True, count=count)
        elements = {k: v for k, v in ref.elements.items() if v}
        return cls(map_id=ref.map_id, fan_out=False, count=len(elements),
                   elements=dict(sorted(elements.items())))

    @classmethod
    def from_ref(cls, ref: Mapping[str, Any]) -> MapInfo | None:
        """Read a stored ``map_ref`` (raw JSON or as loaded).

        Returns:
            The info, or ``None`` when ``ref`` is not a readable ``map_ref``.
        """
        map_id = ref.get("map_id")
        if ref.get("type") != "map_ref" or not isinstance(map_id, str):
            return None
        if ref.get("fan_out"):
            count = ref.get("count")
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                count = 0
            return cls(map_id=map_id, fan_out=True, count=count)
        raw = ref.get("elements")
        elements = {
            int(k): str(v) for k, v in (raw.items() if isinstance(raw, Mapping) else ())
            if str(k).isdigit() and isinstance(v, str) and v
        }
        return cls(map_id=map_id, fan_out=False, count=len(elements),
                   elements=dict(sorted(elements.items())))


def map_infos(composed: Mapping[str, Any]) -> dict[str, MapInfo]:
    """Map step name -> :class:`MapInfo` for every map step in a run's ``composed_contexts``
    (raw JSON, or a loaded ``Context``'s :class:`~reactor.model.run_records.MapRef` values);
    other entries (composed children) are left out."""
    found: dict[str, MapInfo] = {}
    for name, ref in composed.items():
        if isinstance(ref, MapRef):
            found[str(name)] = MapInfo.of(ref)
        elif isinstance(ref, Mapping) and (info := MapInfo.from_ref(ref)) is not None:
            found[str(name)] = info
    return found


@dataclass(frozen=True)
class MapElement:
    """One element of a map step (docs/fan_out.md, "Listing a map's elements").

    Attributes:
        index: the element's index in the map's source.
        run_id: the element's own run id (``Reactor.find`` reads it), or ``None`` for an
            element that never started (``skipped``).
        outcome: one of :data:`MAP_OUTCOMES`.
        error: for a ``failed`` element, its failure's message (secret values masked; the
            message itself is as raised: docs/security.md, "What each view shows"), else
            ``None``.
    """

    index: int
    run_id: str | None
    outcome: MapOutcome
    error: str | None = None


@dataclass(frozen=True)
class MapElementPage:
    """One page of a map step's elements.

    Attributes:
        elements: the elements, in index order.
        next_offset: the ``offset`` of the next page, or ``None`` when this is the last one.
    """

    elements: tuple[MapElement, ...]
    next_offset: int | None


#: What reads a page of a map's elements from storage: ``(info, outcome, offset, limit)``.
ElementReader = Callable[[MapInfo, "MapOutcome | None", int, int], MapElementPage]


def check_element_query(outcome: str | None, offset: int, limit: int) -> MapOutcome | None:
    """Check the arguments of an element page.

    Args:
        outcome: one of :data:`MAP_OUTCOMES`, or ``None`` (every element).
        offset: matching elements to skip (>= 0).
        limit: elements to return (1 .. :data:`MAX_ELEMENT_PAGE`).

    Returns:
        ``outcome``, typed.

    Raises:
        MapElementsArgumentError: an argument is unusable (``field`` names it).
    """
    if outcome is not None and outcome not in MAP_OUTCOMES:
        raise MapElementsArgumentError(
            f"outcome must be one of {', '.join(MAP_OUTCOMES)} or None, got {outcome!r}",
            field="outcome",
        )
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise MapElementsArgumentError(f"offset must be an int >= 0, got {offset!r}",
                                       field="offset")
    if isinstance(limit, bool) or not isinstance(limit, int) or not (
        1 <= limit <= MAX_ELEMENT_PAGE
    ):
        raise MapElementsArgumentError(
            f"limit must be an int in 1..{MAX_ELEMENT_PAGE}, got {limit!r}", field="limit"
        )
    return outcome  # narrowed by the membership test above


@dataclass(frozen=True)
class TraceEntry:
    """One execution trace entry.

    Attributes:
        type: ``run``, ``failed``, ``retry``, ``compensate``, ``compensate_failure``,
            ``undo``, ``undo_failure``, ``halt``, ``skipped``, ``paused`` or ``resumed``
            (an interrupt: docs/run-control.md, "Interrupts"), or ``cancelled`` (a cancel
            took effect: docs/run-control.md, "Cancel").
        step: the step name.
        at: epoch seconds (storage clock).
        attempt: the attempt number for ``run``/``failed``/``retry`` entries.
        detail: a short message (failure message, retry delay, halt reason...).
        started: on the ``run`` entry of a step that ran as a concurrent branch, epoch
            seconds when it started (``at`` is when it was recorded), so overlapping steps
            show (docs/concepts.md, "Concurrency"); else ``None``.
    """

    type: str
    step: str | None
    at: float
    attempt: int | None = None
    detail: str | None = None
    started: float | None = None

    @classmethod
    def from_record(cls, record: TraceRecord) -> TraceEntry:
        """Build from a loaded trace record."""
        return cls(type=record.type, step=record.step, at=float(record.at),
                   attempt=record.attempt, detail=record.detail, started=record.started)

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> TraceEntry:
        """Build from a stored trace dict (unknown keys are ignored)."""
        attempt = entry.get("attempt")
        detail = entry.get("detail")
        at = entry.get("at", 0.0)
        started = entry.get("started")
        return cls(
            type=str(entry.get("type", "")),
            step=entry.get("step"),
            at=float(at) if isinstance(at, int | float) else 0.0,
            attempt=attempt if isinstance(attempt, int) else None,
            detail=str(detail) if detail is not None else None,
            started=(float(started) if isinstance(started, int | float)
                     and not isinstance(started, bool) else None),
        )


@dataclass(frozen=True)
class RunView:
    """A stored run, as shown to users and the dashboard.

    Attributes:
        run_id: the run's id.
        reactor: the registered reactor name.
        status: the run status.
        inputs: the inputs, secrets shown as ``"[REDACTED]"``.
        results: step name -> value, for the steps completed so far.
        trace: the execution trace, oldest first.
        failure: the run's ``Failure`` (redacted inputs), if it failed.
        undo_stack: the names of the completed steps still on the undo stack, oldest first.
        current_step: the step in flight when the run stopped (aborted runs), if any.
        map_metadata: for a map element: ``{"map_step", "map_id", "index", "parent_reactor"}``
            (a read-only mapping: the stored form of :attr:`map_membership`); else ``None``.
        parent_run_id: the parent run's id, if any.
        root_run_id: the top-level run's id.
        created_at: epoch seconds.
        updated_at: epoch seconds.
        children: compose step name -> the embedded child run's view.
        idempotency_key: the idempotency key this run holds, if any (docs/run-control.md,
            "Idempotency keys").
        retried_from: the run this run retries (``Reactor.retry``), if any.
        retries: the runs started by ``Reactor.retry`` of this run, oldest first
            (docs/run-control.md, "Retrying a failed run").
        interrupt: for a ``paused`` run, the interrupt it waits at (step path, correlation
            id, timeout and deadline, attempts; docs/run-control.md, "Interrupts"); else
            ``None``.
        sleep: for a ``paused`` run sleeping at a ``sleep`` step, its step path and wake time
            (docs/schedules.md, "Durable sleep"; :attr:`sleeping_until`, :attr:`waiting_for`);
            else ``None``.
        cancel: for a run cancelled (or being cancelled) by ``Reactor.cancel``, the request:
            its ``reason``, whether the work was rolled back (``rollback``) and when it was
            requested (``requested_at``, epoch seconds; docs/run-control.md, "Cancel"); else
            ``None``. A run its deadline stopped holds the deadline's request here
            (``cause == "deadline"``).
        deadline: the run's deadline, epoch seconds on the runtime clock (docs/concepts.md,
            "Run deadlines"), or ``None``.
        suspension: while the run is ``suspended``: who suspended it, why, when and the
            status it goes back to (docs/operations.md, "Suspend and unsuspend"); else
            ``None``.
        failure_hold: while the run is ``failed_paused``: the failed step, its kind, whether
            its compensate is pending, its attempts and when it was held (docs/operations.md,
            "Pause, rewind, fork"); else ``None``.
        forked_from: the run and step a forked run started from, else ``None``.
        definition: the definition the run was started under: its fingerprint and the
            reactor's ``version`` label (docs/deploys.md, "Fingerprints"); ``None`` for a run
            stored before fingerprints existed.
        needs_version: while the run is ``needs_version``: the step and rule that refused it,
            the reason and the status it goes back to (docs/deploys.md, "Compatibility
            rules"); else ``None``.
        maps: map step name -> :class:`MapInfo`, for every map step the run started (its
            elements: :meth:`map_elements`).
        map_membership: for a map element, the typed
            :class:`~reactor.model.run_records.MapMembership` behind :attr:`map_metadata` (map
            step, map id, index, parent reactor: docs/concepts.md, "Inline map"); else
            ``None``.
    """

    run_id: str
    reactor: str
    status: RunStatus
    inputs: Mapping[str, Any]
    results: Mapping[str, Any]
    trace: tuple[TraceEntry, ...] = ()
    failure: Failure | None = None
    undo_stack: tuple[str, ...] = ()
    current_step: str | None = None
    map_metadata: Mapping[str, Any] | None = None
    parent_run_id: str | None = None
    root_run_id: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    children: Mapping[str, RunView] = field(default_factory=dict)
    idempotency_key: str | None = None
    retried_from: str | None = None
    retries: tuple[str, ...] = ()
    interrupt: PendingInterrupt | None = None
    sleep: PendingSleep | None = None
    cancel: CancelRequest | None = None
    deadline: float | None = None
    suspension: Suspension | None = None
    failure_hold: FailureHold | None = None
    forked_from: ForkOrigin | None = None
    definition: DefinitionStamp | None = None
    needs_version: VersionHold | None = None
    maps: Mapping[str, MapInfo] = field(default_factory=dict)
    element_reader: ElementReader | None = field(default=None, compare=False, repr=False)
    map_membership: MapMembership | None = None

    def map_elements(
        self, step: str, *, outcome: str | None = None, offset: int = 0, limit: int = 100
    ) -> MapElementPage:
        """One page of the elements of map step ``step`` (docs/fan_out.md, "Listing a map's
        elements"), read from storage now.

        Args:
            step: a map step this run started (a key of :attr:`maps`).
            outcome: only elements of this outcome (one of :data:`MAP_OUTCOMES`); ``None``:
                every element.
            offset: matching elements to skip (>= 0).
            limit: elements to return (1 .. :data:`MAX_ELEMENT_PAGE`, default 100).

        Returns:
            The page: each element's index, run id, outcome and (failed) error, in index
            order, and the ``next_offset`` to pass for the next page (``None``: last page).

        Raises:
            MapElementsArgumentError: ``step`` is no map step of this run, or another argument
                is unusable, or the view was built without storage (``field="view"``: use
                ``Reactor.find``).
            StorageError: the backend failed.
        """
        typed = check_element_query(outcome, offset, limit)
        info = self.maps.get(step) if isinstance(step, str) else None
        if info is None:
            started = ", ".join(sorted(self.maps)) or "none"
            raise MapElementsArgumentError(
                f"run {self.run_id!r} has no started map step {step!r} (started: {started})",
                field="step",
            )
        if self.element_reader is None:
            raise MapElementsArgumentError(
                "this RunView was built without storage; read it with Reactor.find to list "
                "map elements", field="view",
            )
        return self.element_reader(info, typed, offset, limit)

    @property
    def sleeping_until(self) -> float | None:
        """When a sleeping run wakes, epoch seconds on the runtime clock; ``None`` unless the
        run is ``paused`` at a ``sleep`` step (docs/schedules.md, "Durable sleep")."""
        return None if self.sleep is None else self.sleep.wake_at

    @property
    def waiting_for(self) -> str | None:
        """What a sleeping run waits for, in words: ``"sleeping until <UTC ISO 8601 time>"``
        (at step ``<path>``); ``None`` for a run that does not sleep (docs/schedules.md,
        "Durable sleep")."""
        if self.sleep is None:
            return None
        when = datetime.fromtimestamp(self.sleep.wake_at, UTC).isoformat(timespec="seconds")
        return f"sleeping until {when} (step {self.sleep.step!r})"

    @classmethod
    def from_context(cls, ctx: Context, elements: ElementReader | None = None) -> RunView:
        """Build the masked view of ``ctx`` (composed children become nested views in
        ``children``).

        Args:
            ctx: a context as loaded (sealed values and clear ones are both masked).
            elements: reads map elements from the run's storage, for :meth:`map_elements`
                (``Reactor.find`` passes one); ``None``: the view cannot list them.

        Returns:
            The view; no secret of ``ctx`` appears in it.
        """
        children = {
            name: cls.from_context(value, elements)
            for name, value in ctx.composed_contexts.items()
            if isinstance(value, Context)
        }
        links = ctx.engine_state.links
        return cls(
            run_id=ctx.context_id,
            reactor=ctx.reactor,
            status=ctx.status,
            inputs=ctx.redacted_inputs(),
            results={k: mask_value(v) for k, v in ctx.intermediate_results.items()},
            trace=tuple(TraceEntry.from_record(e) for e in ctx.execution_trace),
            failure=ctx.failure.masked() if ctx.failure is not None else None,
            undo_stack=tuple(e.step for e in ctx.undo_stack),
            current_step=ctx.current_step,
            map_metadata=None if ctx.map_metadata is None else ctx.map_metadata.as_mapping(),
            parent_run_id=ctx.parent_context_id,
            root_run_id=ctx.root_context_id,
            created_at=ctx.created_at,
            updated_at=ctx.updated_at,
            children=children,
            idempotency_key=links.idempotency_key,
            retried_from=links.retried_from,
            retries=links.retries,
            interrupt=ctx.engine_state.interrupt,
            sleep=(
                ctx.engine_state.sleep if ctx.status is RunStatus.PAUSED else None
            ),
            cancel=ctx.engine_state.cancel,
            deadline=ctx.engine_state.deadline,
            suspension=ctx.engine_state.suspension,
            failure_hold=ctx.engine_state.failure_hold,
            forked_from=ctx.engine_state.forked_from,
            definition=ctx.engine_state.definition,
            needs_version=ctx.engine_state.needs_version,
            maps=map_infos(ctx.composed_contexts),
            element_reader=elements,
            map_membership=ctx.map_metadata,
        )
