"""The coordination view of a run (docs/dashboard.md, "Coordination view"; the primitives:
docs/coordination.md).

One row per declared primitive: the reactor-level ones keyed on the run's inputs, and **one row
per coordinating step per primitive** keyed on that step's own arguments, exactly as the engine
keys them (``Coordination.resolve_key`` with the step's default key). A step declaring a lock
and a semaphore is two rows: both gates are live, and an operator has to see both.

* **Which arguments.** A step still on the undo stack is keyed on the arguments stored there
  (what it ran with); a step whose compensate is pending, on the rollback record's; any other
  reached step, on its argument templates resolved against the run's inputs and results, then
  validated field by field against the step's contract, as the engine does before it takes a
  hold.
* **Pending rows.** A step the run has not reached yet (no trace entry, result, unit record or
  park state) gives one ``pending`` row per primitive, so the list is stable while the run
  moves.
* **Redacted arguments.** A secret argument (or input) is never decrypted: it is handed to the
  key function as a stand-in that refuses every use. A key computed from it is reported
  ``key_unavailable`` instead of probing a key that is not the one held; a constant or default
  key stays resolvable.
* **Live state** per primitive, read without changing anything: the lock's holder (this run or
  which other one), remaining TTL and fencing token; the semaphore's holders and limit; the
  rate limit's use of each window; the period's current bucket and its marker; the ordered
  lock's cursor, this run's ticket, its place in line and fencing token ``(epoch, nonce)``.
* **Row errors, never a 500.** A named rate limit that is not registered in this process, a key
  function that raises, arguments that no longer resolve or a storage read that fails become
  that row's ``error``/``key_error``; the other rows are still shown.
* **Waiting on.** What the run is parked on (``EngineState.waiting``) and, for every parked
  ``async_step`` unit, the marker on its own Step Result Record (the unit never writes its
  parent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from reactor.dashboard.stored import StoredRun
from reactor.dsl.coordination import (
    Coordination,
    LockDecl,
    OrderedLockDecl,
    PeriodDecl,
    RateLimitDecl,
    SemaphoreDecl,
)
from reactor.dsl.declarations import StepSpec
from reactor.dsl.definition import ReactorDefinition
from reactor.dsl.inputs import InputContract
from reactor.engine import REACTOR_SCOPE, resolve_arguments, step_default_key
from reactor.errors import (
    ArgumentResolutionError,
    CoordinationKeyError,
    InputValidationError,
    ReactorError,
    StorageError,
    UnknownRateLimitError,
)
from reactor.model.context import Context
from reactor.model.coordination.periods import bucket_key
from reactor.model.engine_state import EngineState, KeyedTicket
from reactor.model.keys import step_liveness_key
from reactor.model.masking import REDACTED, is_secret
from reactor.model.run_documents import trace_of
from reactor.ports.storage import Storage

__all__ = ["KEY_UNAVAILABLE", "RedactedRead", "build_coordination", "waiting_markers"]

#: The ``key_error`` of a row whose key would be computed from redacted values.
KEY_UNAVAILABLE = "key unavailable: the arguments it is computed from are redacted"


class RedactedRead(Exception):
    """A key function used a redacted value (see :class:`_Redacted`)."""


class _Redacted:
    """Stands in for a secret argument: any use of it raises :class:`RedactedRead`."""

    __slots__ = ()

    def _refuse(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise RedactedRead(REDACTED)

    __str__ = __format__ = __getattr__ = __getitem__ = __iter__ = __len__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __bool__ = _refuse
    __add__ = __radd__ = __mul__ = __mod__ = __contains__ = __int__ = __float__ = _refuse

    def __repr__(self) -> str:
        return REDACTED


_SECRET = _Redacted()


def _typed(
    contract: InputContract | None, values: Mapping[str, Any], secrets: set[str]
) -> dict[str, Any]:
    """``values`` validated field by field (secrets replaced by the stand-in), as the key
    functions receive them.

    Raises:
        InputValidationError: a value does not validate (the field is named, never the value).
    """
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name in secrets or is_secret(value) or value == REDACTED:
            out[name] = _SECRET
            continue
        declared = contract.inputs.get(name) if contract is not None else None
        if declared is None:
            out[name] = value
            continue
        try:
            out[name] = declared.validate(value)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise InputValidationError(f"argument {name!r} does not validate") from exc
    if contract is not None:
        for name, declared in contract.inputs.items():
            if name not in out and not declared.required:
                out[name] = declared.default
    return out


def _key(
    decl: Coordination, inputs: Mapping[str, Any], default: str
) -> tuple[str | None, str | None]:
    """``(key, None)`` or ``(None, why not)``."""
    try:
        return decl.resolve_key(inputs, default), None
    except RedactedRead:
        return None, KEY_UNAVAILABLE
    except CoordinationKeyError as exc:
        if isinstance(exc.__cause__, RedactedRead):
            return None, KEY_UNAVAILABLE
        return None, str(exc)


def _declaration(decl: Coordination) -> dict[str, Any]:
    if isinstance(decl, LockDecl):
        return {"ttl": decl.ttl, "wait": decl.wait, "auto_extend": decl.auto_extend}
    if isinstance(decl, SemaphoreDecl):
        return {"limit": decl.limit, "lease": decl.lease, "wait": decl.wait}
    if isinstance(decl, RateLimitDecl):
        return {"name": decl.name,
                "windows": [{"name": w.name, "seconds": w.seconds, "limit": w.limit}
                            for w in decl.windows]}
    if isinstance(decl, PeriodDecl):
        return {"every": decl.every}
    if isinstance(decl, OrderedLockDecl):
        return {"poison_pill_timeout": decl.poison_pill_timeout, "strict": decl.strict}
    return {}


class _Reader:
    """Reads the live state of one run's primitives."""

    def __init__(self, stored: StoredRun, units: Mapping[str, Mapping[str, Any]]) -> None:
        self.storage: Storage = stored.runtime.storage
        self.now = self.storage.now()
        self.run_id = stored.record.context_id
        self.root_id = stored.record.root_context_id or stored.record.context_id
        self.engine_state = stored.engine_state
        self.units = units

    def owners(self, step: str | None) -> set[str]:
        """The lock owners that are this run (its root id; a unit's derived owner)."""
        owners = {self.root_id}
        if step is not None:
            owners.add(step_liveness_key(self.run_id, step))
        return owners

    def _holder_run(self, owner: str) -> str | None:
        candidate = owner
        if owner.startswith("async_step:"):
            candidate = owner.split(":")[1] if owner.count(":") >= 2 else owner
        try:
            return candidate if self.storage.contexts.load(candidate) is not None else None
        except StorageError:
            return None

    def lock(self, key: str, step: str | None) -> dict[str, Any]:
        info = self.storage.locks.info(key)
        if info is None:
            return {"held": False}
        mine = info.owner in self.owners(step)
        return {
            "held": True,
            "owner": info.owner,
            "held_by_this_run": mine,
            "holder_run_id": self.run_id if mine else self._holder_run(info.owner),
            "count": info.count,
            "expires_at": info.expires_at,
            "remaining_ttl": None if info.expires_at is None
            else max(info.expires_at - self.now, 0.0),
            "fencing_token": info.token,
        }

    def semaphore(self, decl: SemaphoreDecl, key: str, scope: str) -> dict[str, Any]:
        state = self.storage.semaphores.state(key)
        mine = {h.holder for h in self.engine_state.parked_holds.get(scope, ())
                if h.primitive == "semaphore"}
        holders = [] if state is None else [
            {"holder": holder, "expires_in": max(expiry - self.now, 0.0),
             "this_run": holder in mine}
            for holder, expiry in sorted(state.holders.items(), key=lambda kv: kv[1])
        ]
        return {
            "limit": state.limit if state is not None else decl.limit,
            "used": len(holders),
            "free": max((state.limit if state is not None else decl.limit) - len(holders), 0),
            "holders": holders,
        }

    def rate_limit(self, decl: RateLimitDecl, key: str) -> dict[str, Any]:
        windows = decl.resolve_windows()  # UnknownRateLimitError: the row's error
        return {"windows": [
            {"name": w.name, "seconds": w.seconds, "limit": w.limit,
             "used": self.storage.rate_limits.count(key, w)}
            for w in windows
        ]}

    def period(self, decl: PeriodDecl, key: str) -> dict[str, Any]:
        bucket = bucket_key(f"period:{key}", decl.every, self.now)
        marker = self.storage.periods.marker(bucket)
        return {
            "bucket": bucket,
            "marked": marker is not None,
            "marked_at": marker.marked_at if marker is not None else None,
            "marked_by": marker.context_id if marker is not None else None,
            "marked_by_this_run": marker is not None and marker.context_id == self.run_id,
        }

    def ticket(self, step: str | None) -> KeyedTicket | None:
        if step is None:
            return self.engine_state.ordered_ticket
        ticket = self.engine_state.step_ordered_tickets.get(step)
        if ticket is not None:
            return ticket
        raw = (self.units.get(step) or {}).get("ticket")
        try:
            return KeyedTicket.from_json(raw) if isinstance(raw, Mapping) else None
        except ReactorError:
            return None

    def ordered_lock(self, key: str, step: str | None) -> dict[str, Any]:
        state = self.storage.ordered_locks.peek(key)
        live: dict[str, Any] = {
            "cursor": state.last_completed,
            "next_nonce": state.next_nonce,
            "first_failed": state.first_failed or None,
            "epoch": state.epoch,
            "in_flight": len(state.in_flight),
            "ticket": None,
        }
        ticket = self.ticket(step)
        if ticket is not None and ticket.key == key:
            live["ticket"] = {
                "nonce": ticket.nonce,
                "epoch": ticket.epoch,
                "fencing_token": [ticket.epoch, ticket.nonce],
                "ahead": max(ticket.nonce - state.last_completed - 1, 0),
                "turn": ticket.nonce <= state.last_completed + 1,
                "stale": bool(state.epoch and ticket.epoch and ticket.epoch != state.epoch),
            }
        return live

    def live(self, decl: Coordination, key: str, step: str | None) -> dict[str, Any]:
        scope = REACTOR_SCOPE if step is None else step
        if isinstance(decl, LockDecl):
            return self.lock(key, step)
        if isinstance(decl, SemaphoreDecl):
            return self.semaphore(decl, key, scope)
        if isinstance(decl, RateLimitDecl):
            return self.rate_limit(decl, key)
        if isinstance(decl, PeriodDecl):
            return self.period(decl, key)
        if isinstance(decl, OrderedLockDecl):
            return self.ordered_lock(key, step)
        return {}


def _waiting_here(engine_state: EngineState, step: str | None, primitive: str) -> bool:
    waiting = engine_state.waiting
    if waiting is None or waiting.primitive != primitive:
        return False
    return waiting.scope == (REACTOR_SCOPE if step is None else step)


def _row(
    reader: _Reader,
    decl: Coordination,
    step: str | None,
    key: str | None,
    key_error: str | None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "scope": "reactor" if step is None else "step",
        "step": step,
        "primitive": decl.primitive,
        "state": "resolved",
        "key": key,
        "key_error": key_error,
        "declaration": _declaration(decl),
        "live": None,
        "error": None,
        "waiting": _waiting_here(reader.engine_state, step, decl.primitive),
    }
    if isinstance(decl, RateLimitDecl) and decl.name is not None:
        try:  # the named windows, for the row even when the key is unavailable
            row["declaration"]["windows"] = [
                {"name": w.name, "seconds": w.seconds, "limit": w.limit}
                for w in decl.resolve_windows()
            ]
        except UnknownRateLimitError as exc:
            row["state"] = "error"
            row["error"] = str(exc)
            return row
    if key is None:
        row["state"] = "key_unavailable" if key_error == KEY_UNAVAILABLE else "error"
        return row
    try:
        row["live"] = reader.live(decl, key, step)
    except UnknownRateLimitError as exc:
        row["state"], row["error"] = "error", str(exc)
    except StorageError as exc:
        row["state"], row["error"] = "error", f"the storage failed: {exc}"
    except (ReactorError, ValueError) as exc:
        row["state"], row["error"] = "error", f"{type(exc).__name__}: {exc}"
    return row


def _trace_steps(document: Mapping[str, Any] | None) -> set[str]:
    if document is None:
        return set()
    return {e.step for e in trace_of(document) if e.step}


def _reached(name: str, stored: StoredRun, units: Mapping[str, Any], traced: set[str]) -> bool:
    document = stored.document or {}
    state = stored.engine_state
    results = document.get("intermediate_results")
    waiting = state.waiting
    return (
        name in traced
        or (isinstance(results, Mapping) and name in results)
        or document.get("current_step") == name
        or name in units
        or (waiting is not None and waiting.scope == name)
        or name in state.parked_holds
        or name in state.step_ordered_tickets
    )


def _step_arguments(
    definition: ReactorDefinition, spec: StepSpec, ctx: Context
) -> tuple[dict[str, Any], set[str]]:
    """The arguments step ``spec`` is keyed on, and the names among them that are secrets.

    Raises:
        ArgumentResolutionError: the templates no longer resolve.
    """
    name = spec.name
    for entry in reversed(ctx.undo_stack):
        if entry.step == name:
            return dict(entry.arguments), set(entry.redacted or ())
    rollback = ctx.rollback
    if rollback is not None and rollback.step == name:
        return dict(rollback.arguments), set(rollback.redacted or ())
    arguments = resolve_arguments(spec, ctx)
    return arguments, set(definition.secret_arguments(name, arguments, ctx.redacted))


def _step_rows(
    reader: _Reader,
    stored: StoredRun,
    definition: ReactorDefinition,
    spec: StepSpec,
    ctx: Context | None,
    ctx_error: str | None,
    traced: set[str],
) -> list[dict[str, Any]]:
    name = spec.name
    if not _reached(name, stored, reader.units, traced):
        return [{"scope": "step", "step": name, "primitive": d.primitive, "state": "pending",
                 "key": None, "key_error": None, "declaration": _declaration(d), "live": None,
                 "error": None, "waiting": False} for d in spec.coordination]
    default = step_default_key(definition.name, spec)
    inputs: dict[str, Any] | None = None
    problem: str | None = ctx_error
    if ctx is not None:
        contract = spec.step_class.contract if spec.step_class is not None else None
        try:
            arguments, secrets = _step_arguments(definition, spec, ctx)
            inputs = _typed(contract, arguments, secrets)
        except (ArgumentResolutionError, InputValidationError) as exc:
            problem = f"the step's arguments cannot be resolved here: {exc}"
    rows = []
    for decl in spec.coordination:
        if inputs is not None:
            key, key_error = _key(decl, inputs, default)
        elif decl.key is None or isinstance(decl.key, str):
            key, key_error = _key(decl, {}, default)
        else:
            key, key_error = None, problem
        rows.append(_row(reader, decl, name, key, key_error))
    return rows


def _reactor_rows(
    reader: _Reader, stored: StoredRun, definition: ReactorDefinition, ctx: Context | None,
    ctx_error: str | None,
) -> list[dict[str, Any]]:
    inputs: dict[str, Any] | None = None
    problem = ctx_error
    if ctx is not None:
        secrets = set(ctx.redacted) | set(definition.contract.redacted)
        try:
            inputs = _typed(definition.contract, ctx.inputs, secrets)
        except InputValidationError as exc:
            problem = f"the run's inputs do not validate: {exc}"
    rows = []
    for decl in definition.coordination:
        if inputs is not None:
            key, key_error = _key(decl, inputs, definition.name)
        elif decl.key is None or isinstance(decl.key, str):
            key, key_error = _key(decl, {}, definition.name)
        else:
            key, key_error = None, problem
        rows.append(_row(reader, decl, None, key, key_error))
    return rows


def waiting_markers(
    engine_state: EngineState, units: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """What the run waits on: its own park marker, then each parked unit's (from the unit's
    Step Result Record)."""
    markers: list[dict[str, Any]] = []
    waiting = engine_state.waiting
    if waiting is not None:
        markers.append({
            "source": "run",
            "step": None if waiting.scope in (None, REACTOR_SCOPE) else waiting.scope,
            "primitive": waiting.primitive,
            "key": waiting.key,
            "attempts": None,
            "next_attempt_at": None,
        })
    for step, unit in units.items():
        if unit.get("status") == "completed" or not unit.get("waiting"):
            continue
        markers.append({
            "source": "async_step",
            "step": step,
            "primitive": unit.get("waiting_primitive"),
            "key": unit.get("waiting"),
            "attempts": unit.get("contention_attempts"),
            "next_attempt_at": unit.get("next_attempt_at"),
        })
    return markers


def build_coordination(
    stored: StoredRun, units: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The coordination view of a run (see the module docstring).

    Args:
        stored: the run.
        units: its ``async_step`` units (:func:`reactor.dashboard.async_units.unit_views`).

    Returns:
        ``{"available", "error", "reactor": [rows], "steps": [rows], "waiting": [markers]}``;
        a row is ``{"scope", "step", "primitive", "state", "key", "key_error",
        "declaration", "live", "error", "waiting"}`` with ``state`` one of ``resolved``,
        ``pending``, ``key_unavailable`` or ``error``.
    """
    markers = waiting_markers(stored.engine_state, units)
    definition = stored.definition
    if definition is None:
        return {"available": False, "error": stored.definition_error, "reactor": [],
                "steps": [], "waiting": markers}
    reader = _Reader(stored, units)
    ctx, ctx_error = stored.context()
    traced = _trace_steps(stored.document)
    steps: list[dict[str, Any]] = []
    for spec in definition.steps.values():
        if spec.coordination:
            steps.extend(_step_rows(reader, stored, definition, spec, ctx, ctx_error, traced))
    return {
        "available": True,
        "error": None,
        "reactor": _reactor_rows(reader, stored, definition, ctx, ctx_error),
        "steps": steps,
        "waiting": markers,
    }
