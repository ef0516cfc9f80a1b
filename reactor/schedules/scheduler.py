"""``Scheduler``: decide each schedule's ticks and start their runs, exactly one run per tick
across any number of schedulers (docs/schedules.md, "How a tick becomes one run").

Every scheduler reads the same stored state (:mod:`reactor.schedules.records`) and moves it
by compare-and-set, one tick at a time, in two writes:

1. **Decide.** With no decision pending, the scheduler picks the next tick to settle (the
   catch-up policy, jitter and overlap applied; :meth:`Scheduler.decide`) and stores it as the
   pending decision. Of several schedulers racing, one write wins; the others read it back.
2. **Carry out, then settle.** A pending ``run`` starts the tick's run with the idempotency
   key ``schedule:<name>:<tick>`` (:func:`reactor.engine.run_control.idempotency.start_once`):
   whoever calls it, however often, the key makes one run, and every caller learns its id.
   The scheduler then stores the tick settled (the cursor moved to it, ``last`` set, nothing
   pending) and logs it, once: only the write that wins logs.

A scheduler killed anywhere in between leaves a decision that the next pass of any scheduler
carries out, starting the run if nobody did, finding it otherwise. A run is never started for
a tick that was not decided, and a decided tick is carried out at most once by the key.

Log lines (logger ``reactor.schedules``): ``event=schedule_tick schedule=S tick=T
run_id=R``, ``event=schedule_tick_skipped schedule=S tick=T reason="..."`` and
``event=schedule_ticks_skipped schedule=S from=T1 to=T2 reason="..."``.
"""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from types import FrameType

from reactor import config, registry
from reactor.config import Runtime
from reactor.dsl.definition import ReactorDefinition
from reactor.engine.run_control.idempotency import start_once
from reactor.errors import ScheduleValueError, UnknownReactorError
from reactor.model.status import TERMINAL_STATUSES, RunStatus
from reactor.model.text import escaping_logger
from reactor.ports.storage import ScheduleStore
from reactor.schedules.declared import declared
from reactor.schedules.records import Decision, LastTick, ScheduleState, schedule_store
from reactor.schedules.spec import Schedule
from reactor.schedules.ticks import tick_text

__all__ = [
    "DEFAULT_POLL_SECONDS",
    "MISSED_AFTER",
    "Scheduler",
    "TickOutcome",
    "idempotency_key",
    "stored_schedules",
]

log = escaping_logger("reactor.schedules")

#: With ``catchup="skip"``, a tick whose pass comes more than this many seconds after it fell
#: due (its jitter included) is missed, not run.
MISSED_AFTER = 60.0
#: The longest a scheduler's loop waits between two passes, in seconds (a pass also comes at
#: the next tick due).
DEFAULT_POLL_SECONDS = 5.0
#: Ticks a scan looks back over at most (``catchup="one"`` and ``"skip"``).
_SCAN_LIMIT = 1000
#: Seconds before a pass tries again a decision whose run another scheduler is storing.
_RETRY_PENDING = 1.0


def idempotency_key(name: str, tick: float) -> str:
    """The idempotency key of the run of tick ``tick`` of schedule ``name``:
    ``schedule:<name>:<tick as ISO 8601 UTC>`` (docs/schedules.md)."""
    return f"schedule:{name}:{tick_text(tick)}"


@dataclass(frozen=True, slots=True)
class TickOutcome:
    """A tick this scheduler settled (the write that won).

    Attributes:
        schedule: the schedule's name.
        tick: the tick (epoch seconds, UTC).
        action: ``"run"`` or ``"skip"``.
        run_id: the tick's run (``None`` when skipped).
        reason: why it was skipped (``None`` for a run).
        skipped: how many earlier ticks it settled as skipped, as ``(first, last)`` epoch
            seconds, or ``None``.
        skipped_reason: why those were skipped.
    """

    schedule: str
    tick: float
    action: str
    run_id: str | None
    reason: str | None = None
    skipped: tuple[float, float] | None = None
    skipped_reason: str | None = None


def stored_schedules(store: ScheduleStore) -> Iterator[tuple[str, ScheduleState, str]]:
    """Every stored schedule document as ``(name, state, version)``, in name order (a page of
    100 at a time).

    Raises:
        StorageError: the backend failed, or a document is malformed.
    """
    after: str | None = None
    while True:
        page = store.scan(after=after, limit=100)
        for record in page:
            yield record.name, ScheduleState.from_document(record.name, record.document), \
                record.version
        if len(page) < 100:
            return
        after = page[-1].name


class Scheduler:
    """Decides the ticks of every schedule and starts their runs (see the module docstring).

    Args:
        runtime: the storage, router, settings and clock (default
            :func:`reactor.config.current`).
        schedules: the code schedules to run; ``None`` (default): those registered in this
            process at each pass (:func:`reactor.schedules.register`).
        stored: also run the schedules stored with ``reactor schedules add`` (default).
        poll_seconds: the longest :meth:`run_forever` waits between two passes.

    Raises:
        ValueError: ``poll_seconds`` is not a positive finite number.
    """

    def __init__(
        self,
        runtime: Runtime | None = None,
        *,
        schedules: Iterable[Schedule] | None = None,
        stored: bool = True,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
    ) -> None:
        if (isinstance(poll_seconds, bool) or not isinstance(poll_seconds, int | float)
                or not math.isfinite(poll_seconds) or poll_seconds <= 0):
            raise ValueError(f"poll_seconds must be a positive number, got {poll_seconds!r}")
        self.runtime = runtime or config.current()
        self._schedules = None if schedules is None else {s.name: s for s in schedules}
        self.stored = stored
        self.poll_seconds = float(poll_seconds)
        self.next_due: float | None = None
        self._warned: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one pass ------------------------------------------------------------------------------

    def tick(self, now: float | None = None) -> list[TickOutcome]:
        """One pass: settle every tick due at ``now`` of every schedule (code and stored),
        oldest first, and compute :attr:`next_due`.

        A schedule whose pass fails (a backend error, a stored schedule this process cannot
        read, an unregistered reactor) is logged and left for the next pass; the others go on.

        Args:
            now: epoch seconds (default: the runtime clock's ``now()``).

        Returns:
            The ticks this scheduler settled, in order.
        """
        now = self.runtime.clock.now() if now is None else now
        store = schedule_store(self.runtime.storage)
        outcomes: list[TickOutcome] = []
        next_due: float | None = None
        for schedule, state, version, in_code in self._active(store, now):
            try:
                settled, due = self._settle(store, schedule, state, version, now, in_code)
            except Exception as exc:  # one schedule's failure never stops the others
                log.warning("event=schedule_failed schedule=%s error=%s: %s",
                            schedule.name, type(exc).__name__, exc)
                due = now + self.poll_seconds
                settled = []
            outcomes.extend(settled)
            if due is not None and (next_due is None or due < next_due):
                next_due = due
        self.next_due = next_due
        return outcomes

    def _active(
        self, store: ScheduleStore, now: float
    ) -> Iterator[tuple[Schedule, ScheduleState | None, str | None, bool]]:
        """The schedules of this pass with their stored state and version (``None`` when
        none is stored yet) and whether they are code schedules: the code schedules, then the
        stored ones not shadowed by one."""
        code = dict(declared() if self._schedules is None else self._schedules)
        stored: dict[str, tuple[ScheduleState, str]] = {}
        try:
            for name, read, read_version in stored_schedules(store):
                stored[name] = (read, read_version)
        except Exception as exc:
            log.warning("event=schedule_scan_failed error=%s: %s", type(exc).__name__, exc)
            return
        for name, schedule in sorted(code.items()):
            found = stored.get(name)
            if found is not None and found[0].definition is not None:
                self._warn_once(name, "shadowed",
                                "event=schedule_shadowed schedule=%s: a stored schedule has "
                                "this name; the one declared in code runs", name)
            state, version = (None, None) if found is None else found
            yield schedule, state, version, True
        if not self.stored:
            return
        for name, (state, version) in stored.items():
            if name in code or state.definition is None:
                continue
            try:
                schedule = Schedule.from_definition(name, state.definition)
            except ScheduleValueError as exc:
                self._warn_once(name, str(exc),
                                "event=schedule_unusable schedule=%s field=%s error=%s",
                                name, exc.field, exc)
                continue
            yield schedule, state, version, False

    def _warn_once(self, name: str, what: str, message: str, *args: object) -> None:
        if (name, what) not in self._warned:
            self._warned.add((name, what))
            log.warning(message, *args)

    def _definition(self, schedule: Schedule) -> ReactorDefinition | None:
        try:
            definition = registry.get(schedule.reactor).definition
        except UnknownReactorError:
            self._warn_once(schedule.name, "unknown reactor",
                            "event=schedule_unknown_reactor schedule=%s reactor=%s: import "
                            "its module in this scheduler (--import)",
                            schedule.name, schedule.reactor)
            return None
        assert isinstance(definition, ReactorDefinition)
        return definition

    def _settle(
        self,
        store: ScheduleStore,
        schedule: Schedule,
        state: ScheduleState | None,
        version: str | None,
        now: float,
        in_code: bool = True,
    ) -> tuple[list[TickOutcome], float | None]:
        """Settle ``schedule``'s due ticks; ``(outcomes, when it is due next)``.

        Only a code schedule's state is created here (first sight); a stored schedule whose
        document is gone was removed meanwhile, and is left alone."""
        outcomes: list[TickOutcome] = []
        definition = self._definition(schedule)
        if definition is None:
            return outcomes, None
        for _ in range(2 * schedule.max_catchup + 10):  # a decision and a settle per tick
            if state is None or version is None:
                if not in_code:
                    return outcomes, None  # removed meanwhile: never written back
                if self._schedules is None and schedule.name not in declared():
                    return outcomes, None  # unregistered meanwhile
                fresh = ScheduleState.new(now)
                version = store.put(schedule.name, fresh.to_document(), expected_version=None)
                state = fresh if version is not None else None
                if state is None:
                    state, version = self._load(store, schedule.name)
                continue
            if state.paused:
                return outcomes, None
            if state.pending is None:
                decision = self.decide(schedule, state, now)
                if decision is None:
                    return outcomes, self._next_due(schedule, state)
                decided = replace(state, pending=decision, updated_at=now)
                new_version = store.put(schedule.name, decided.to_document(),
                                        expected_version=version)
                if new_version is None:
                    state, version = self._load(store, schedule.name)
                    continue
                state, version = decided, new_version
            pending = state.pending
            assert pending is not None
            run_id: str | None = None
            if pending.action == "run":
                key = idempotency_key(schedule.name, pending.tick)
                run_id = start_once(definition, schedule.inputs_for(tick_text(pending.tick)),
                                    key, runtime=self.runtime)
                if run_id is None:  # another scheduler is storing the run: ask again soon
                    return outcomes, now + _RETRY_PENDING
            settled = replace(
                state,
                cursor=max(state.cursor, pending.tick),
                pending=None,
                last=LastTick(tick=pending.tick, action=pending.action, reason=pending.reason,
                              run_id=run_id, at=now),
                last_run_id=run_id if run_id is not None else state.last_run_id,
                updated_at=now,
            )
            new_version = store.put(schedule.name, settled.to_document(),
                                    expected_version=version)
            if new_version is None:  # settled (or paused) by someone else: read it again
                state, version = self._load(store, schedule.name)
                continue
            state, version = settled, new_version
            outcomes.append(self._log(schedule.name, pending, run_id))
        return outcomes, now  # more due than one pass settles: the next pass goes on

    @staticmethod
    def _load(store: ScheduleStore, name: str) -> tuple[ScheduleState | None, str | None]:
        record = store.get(name)
        if record is None:
            return None, None
        return ScheduleState.from_document(name, record.document), record.version

    def _next_due(self, schedule: Schedule, state: ScheduleState) -> float | None:
        tick = schedule.rule.after(state.cursor)
        if tick is None:
            return None
        return schedule.due(tick)

    @staticmethod
    def _log(name: str, pending: Decision, run_id: str | None) -> TickOutcome:
        skipped = None
        if pending.skipped_from is not None and pending.skipped_to is not None:
            skipped = (pending.skipped_from, pending.skipped_to)
            log.info('event=schedule_ticks_skipped schedule=%s from=%s to=%s reason="%s"',
                     name, tick_text(skipped[0]), tick_text(skipped[1]),
                     pending.skipped_reason)
        if pending.action == "run":
            log.info("event=schedule_tick schedule=%s tick=%s run_id=%s",
                     name, tick_text(pending.tick), run_id)
        else:
            log.info('event=schedule_tick_skipped schedule=%s tick=%s reason="%s"',
                     name, tick_text(pending.tick), pending.reason)
        return TickOutcome(schedule=name, tick=pending.tick, action=pending.action,
                           run_id=run_id, reason=pending.reason, skipped=skipped,
                           skipped_reason=pending.skipped_reason)

    # -- deciding a tick -----------------------------------------------------------------------

    def decide(self, schedule: Schedule, state: ScheduleState, now: float) -> Decision | None:
        """The next tick of ``schedule`` to settle at ``now``, or ``None`` when none is due
        (docs/schedules.md, "Catch-up", "Jitter", "Overlap").

        Only ticks after ``state.cursor`` count; a tick is due at ``tick + jitter``.

        * ``catchup="one"``: the newest due tick runs; every earlier one is skipped
          (``"catch-up one"``).
        * ``catchup="all"``: the oldest tick runs once it is due; when more than
          ``max_catchup`` ticks are waiting, the older ones are skipped first
          (``"catch-up limit"``).
        * ``catchup="skip"``: ticks due more than :data:`MISSED_AFTER` seconds ago are skipped
          (``"missed"``); the oldest other one runs once it is due.

        A tick to run is skipped instead, with the reason, when ``overlap="skip"`` and the
        schedule's last run is not finished.
        """
        rule = schedule.rule
        oldest = rule.after(state.cursor)
        if oldest is None or oldest > now:
            return None

        due = schedule.due  # ticks fall due in their order (Schedule.due)

        def newest_first(limit: int) -> list[float]:
            found: list[float] = []
            tick = rule.at_or_before(now)
            while tick is not None and tick > state.cursor and len(found) < limit:
                found.append(tick)
                tick = rule.before(tick)
            return found

        def skipping(last: float, reason: str) -> Decision:
            earlier = rule.before(last) if oldest < last else None
            return Decision(
                tick=last, action="skip", reason=reason,
                skipped_from=oldest if earlier is not None else None,
                skipped_to=earlier, skipped_reason=reason if earlier is not None else None,
            )

        decision: Decision
        if schedule.catchup == "one":
            chosen = next((t for t in newest_first(_SCAN_LIMIT) if due(t) <= now), None)
            if chosen is None:
                return None
            earlier = rule.before(chosen) if oldest < chosen else None
            decision = Decision(
                tick=chosen, action="run",
                skipped_from=oldest if earlier is not None else None, skipped_to=earlier,
                skipped_reason="catch-up one" if earlier is not None else None,
            )
        elif schedule.catchup == "all":
            # the newest tick may not be due yet (its jitter): the window counts due ones
            window = newest_first(schedule.max_catchup + 1)
            window = window[1:] if window and due(window[0]) > now else window
            window = window[:schedule.max_catchup]
            if window and oldest < window[-1]:
                beyond = rule.before(window[-1])
                assert beyond is not None
                return skipping(beyond, "catch-up limit")
            if due(oldest) > now:
                return None
            decision = Decision(tick=oldest, action="run")
        else:
            if due(oldest) < now - MISSED_AFTER:
                recent = newest_first(_SCAN_LIMIT)
                missed = next((t for t in recent if due(t) < now - MISSED_AFTER), None)
                if missed is None:  # older than the scan: take its end as the last missed
                    missed = rule.before(recent[-1]) if recent else oldest
                    assert missed is not None
                return skipping(missed, "missed")
            if due(oldest) > now:
                return None
            decision = Decision(tick=oldest, action="run")
        return self._overlap(schedule, state, decision)

    def _overlap(self, schedule: Schedule, state: ScheduleState, decision: Decision) -> Decision:
        if schedule.overlap != "skip" or state.last_run_id is None:
            return decision
        record = self.runtime.storage.contexts.load(state.last_run_id)
        if record is None:
            return decision
        status = RunStatus(record.status)
        if status in TERMINAL_STATUSES:
            return decision
        return replace(decision, action="skip",
                       reason=f"overlap: run {state.last_run_id} is {status.value}")

    # -- the loop ------------------------------------------------------------------------------

    def run_forever(self, stop: threading.Event | None = None) -> None:
        """Pass after pass until ``stop`` is set (default: :meth:`stop`): each pass at the
        next tick due, at least every :attr:`poll_seconds`; a pass that raises is logged and
        the loop goes on. Waits are real time (``threading.Event.wait``)."""
        stop = stop or self._stop
        clock = self.runtime.clock
        log.info("event=scheduler_started poll_seconds=%.1f", self.poll_seconds)
        while not stop.is_set():
            now = clock.now()
            try:
                self.tick(now)
            except Exception as exc:  # tick() logs per schedule; this is the scan itself
                log.warning("event=scheduler_pass_failed error=%s: %s", type(exc).__name__, exc)
                self.next_due = None
            wake = now + self.poll_seconds
            if self.next_due is not None:
                wake = min(wake, self.next_due)
            stop.wait(min(max(wake - clock.now(), 0.01), self.poll_seconds))
        log.info("event=scheduler_stopped")

    def start(self) -> threading.Thread:
        """Run :meth:`run_forever` in a daemon thread (``reactor worker --schedules``).

        Returns:
            The thread.
        """
        self._stop.clear()
        thread = threading.Thread(target=self.run_forever, name="reactor-scheduler",
                                  daemon=True)
        self._thread = thread
        thread.start()
        return thread

    def stop(self, timeout: float | None = 30.0) -> bool:
        """Stop the loop and wait for the thread (if :meth:`start` started one).

        Returns:
            ``True`` when no thread is left running.
        """
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def serve(self, *, install_signals: bool = True) -> int:
        """Run in this thread until SIGTERM/SIGINT (``reactor schedules run``).

        Returns:
            0.
        """
        previous = {}
        if install_signals and threading.current_thread() is threading.main_thread():

            def on_signal(signum: int, frame: FrameType | None) -> None:
                log.info("event=scheduler_stopping signal=%d", signum)
                self._stop.set()

            previous = {sig: signal.signal(sig, on_signal)
                        for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._stop.clear()
            self.run_forever()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0
