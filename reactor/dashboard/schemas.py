"""The JSON API's request and response shapes, as published in ``/api/openapi.json``
(docs/dashboard.md, "API").

Responses are described field by field where their shape is fixed; the parts that mirror a
stored run (inputs, results, trace details, graph nodes, coordination rows) are JSON objects
whose keys are documented in docs/dashboard.md and in the modules that build them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

__all__ = [
    "ActionResult",
    "CancelRequest",
    "Capabilities",
    "Coordination",
    "DeadLetterPage",
    "ErrorBody",
    "MapElements",
    "PurgeRequest",
    "PurgeResult",
    "QueueOverview",
    "RequeueResult",
    "ResumeRequest",
    "RewindRequest",
    "RunDetail",
    "RunRow",
    "RunsPage",
    "ScheduleRow",
    "SchedulesPage",
    "SuspendRequest",
]


class _Open(BaseModel):
    """A response object that may carry more fields than it declares."""

    model_config = ConfigDict(extra="allow")


class ErrorBody(_Open):
    """Every error: a stable code and one line (docs/dashboard.md, "Errors")."""

    error: str = Field(description="machine-readable code, e.g. not_found, bad_cursor")
    message: str = Field(description="one line for people; never a traceback")


class RunRow(BaseModel):
    """One row of the runs list."""

    run_id: str
    reactor: str
    status: str
    created_at: float = Field(description="epoch seconds")
    updated_at: float = Field(description="epoch seconds")


class RunsPage(BaseModel):
    """A page of the runs list, newest first."""

    runs: list[RunRow]
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next page; null at the end. A filtered page may "
        "be short, even empty, and still carry a cursor")


class Coordination(_Open):
    """The coordination view of a run (docs/dashboard.md, "Coordination view")."""

    available: bool
    error: str | None = None
    reactor: list[dict[str, Any]] = Field(description="reactor-level rows, one per primitive")
    steps: list[dict[str, Any]] = Field(description="one row per coordinating step per "
                                        "primitive; pending rows for steps not reached")
    waiting: list[dict[str, Any]] = Field(description="what the run and its parked async "
                                          "steps wait on")


class RunDetail(_Open):
    """Everything shown about one run (docs/dashboard.md, "Run page")."""

    run_id: str
    reactor: str
    status: str
    created_at: float
    updated_at: float
    parent_run_id: str | None = None
    root_run_id: str | None = None
    document_error: str | None = None
    definition_error: str | None = None
    inputs: dict[str, Any] | None = None
    results: dict[str, Any] | None = None
    maps: list[dict[str, Any]] = Field(default_factory=list)
    graph: dict[str, Any] | None = None
    trace: list[dict[str, Any]] = Field(default_factory=list)
    attempts: dict[str, int] | None = None
    async_steps: dict[str, Any] = Field(default_factory=dict)
    undo_stack: list[dict[str, Any]] = Field(default_factory=list)
    failure: dict[str, Any] | None = None
    pending_compensation: dict[str, Any] | None = None
    interrupt: dict[str, Any] | None = None
    children: dict[str, Any] = Field(default_factory=dict)
    background_handoff: dict[str, Any] | None = None
    coordination: Coordination | None = None
    actions: dict[str, Any] = Field(default_factory=dict)


class ScheduleRow(BaseModel):
    """One schedule (docs/dashboard.md, "Schedules"; docs/schedules.md, "Managing
    schedules")."""

    name: str
    reactor: str | None = Field(description="null: declared in code in a process the "
                                "dashboard did not import, known by its stored state only")
    reactor_registered: bool = Field(description="the reactor is registered in the "
                                     "dashboard's process")
    spec: str | None = Field(description="cron '...' (zone) or every N s")
    timezone: str | None
    source: str = Field(description="code or stored")
    paused: bool
    last_tick: float | None = Field(description="epoch seconds")
    last_action: str | None = Field(description="run or skip")
    last_reason: str | None
    last_run_id: str | None
    last_run_status: str | None
    next_tick: float | None = Field(description="epoch seconds; null while paused")
    next_due: float | None = Field(description="the next tick with its jitter")
    pending: float | None = Field(description="a tick decided and not yet carried out")
    catchup: str | None
    overlap: str | None
    jitter: float | None
    max_catchup: int | None
    actions: dict[str, Any] = Field(description="pause and resume: {enabled, reason}")


class SchedulesPage(BaseModel):
    """Every schedule, by name."""

    schedules: list[ScheduleRow]
    stores_schedules: bool = Field(description="the storage keeps schedules (else code "
                                   "schedules only, and nothing can be paused)")


class MapElements(BaseModel):
    """A page of a map step's elements."""

    step: str
    map_id: str | None
    elements: list[dict[str, Any]] = Field(description="{index, run_id, outcome, error}")
    next_offset: int | None


class QueueOverview(_Open):
    """What the router can tell about its queue (``null`` where it cannot)."""

    router: str
    stats: dict[str, int | None] | None
    stats_error: str | None = None
    inspectable: bool
    dead_letter_admin: bool


class DeadLetterPage(BaseModel):
    """A page of dead letters, oldest first; bodies masked."""

    dead_letters: list[dict[str, Any]]
    next_cursor: str | None
    pageable: bool


class Capabilities(BaseModel):
    """What this dashboard may do."""

    read_only: bool
    actions: list[str]
    cancel: bool
    storage: str
    router: str
    dead_letter_admin: bool
    queue_inspector: bool


class ActionResult(_Open):
    """What an action did: the run it acted on (or started) and that run's status now."""

    run_id: str | None
    status: str


class CancelRequest(BaseModel):
    """``POST /api/runs/{id}/cancel``."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=1000)
    rollback: StrictBool = True  # "no", 0 or "false" must not cancel without rolling back


class ResumeRequest(BaseModel):
    """``POST /api/runs/{id}/resume``: the interrupt's payload (any JSON value)."""

    model_config = ConfigDict(extra="forbid")

    payload: Any = None
    step: str | None = Field(default=None, max_length=500,
                             description="the interrupt's step path the run must wait at")


class SuspendRequest(BaseModel):
    """``POST /api/runs/{id}/suspend`` (docs/operations.md, "Suspend and unsuspend")."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=1000)
    by: str | None = Field(default=None, max_length=1000,
                           description="who asks; default 'dashboard'")


class RewindRequest(BaseModel):
    """``POST /api/runs/{id}/rewind`` (docs/operations.md, "Pause, rewind, fork")."""

    model_config = ConfigDict(extra="forbid")

    from_step: str | None = Field(default=None, max_length=500,
                                  description="a step the run completed, or its failed step "
                                              "(default)")
    reason: str | None = Field(default=None, max_length=1000)
    by: str | None = Field(default=None, max_length=1000,
                           description="who asks; default 'dashboard'")


class PurgeRequest(BaseModel):
    """``POST /api/dead-letters/purge``: the ids, or ``all: true``."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str] | None = Field(default=None, max_length=1000)
    all: bool = False


class RequeueResult(BaseModel):
    """A requeued dead letter and its new job."""

    id: str
    job_id: str


class PurgeResult(BaseModel):
    """How many dead letters were purged."""

    purged: int
