"""``Worker``: consume a router and run each job through its handler (``reactor worker``).

docs/workers.md, "Running workers". Works with any :class:`reactor.ports.Router` through its
consumer side (``receive``/``ack``/``retry``/``extend``/``dead_letter``):

* N handler threads each ``receive`` one delivery at a time, parse its payload
  (:func:`reactor.ports.payloads.parse_payload`), dispatch it by kind
  (:data:`reactor.jobs.handlers.HANDLERS`) and ack it on success;
* **poison jobs** — an undecodable message (the router dead-letters it on receive), a malformed
  payload, an unknown kind, an unregistered reactor name — go to ``router.dead_letter`` with the
  reason and are logged once; they never crash-loop the worker;
* any other exception (a handler bug, a :class:`~reactor.errors.StorageError`) is retried
  with ``backoff(delivery_count)`` until ``max_deliveries``, then dead-lettered with the reason
  (and a ``run`` job's run, failing with an error that is not a backend's, is stored
  ``aborted``: :mod:`reactor.jobs.poisoned_runs`);
* while a handler runs, a heartbeat thread extends the delivery's visibility every
  ``visibility / 3`` seconds so a long job is not redelivered;
* reactors are resolved only by registered name; ``import_modules`` (operator-supplied, e.g.
  ``--import myapp.reactors``) are imported at start so their reactors register;
* with ``async_slots`` N > 0, a ``step`` job whose unit body is ``async def`` or a ``run``
  job of an async reactor (:func:`reactor.jobs.slot_jobs.awaits_on_loop`) is handed to the
  thread's slot host (:class:`reactor.jobs.async_slots.SlotHost`): the same processing,
  suspended instead of blocking while the body awaits, so the handler thread receives the
  next job at once; a thread takes a free slot before each ``receive``, so with N jobs in
  slots the worker receives nothing more (back-pressure; docs/workers.md, "Async slots");
* from :meth:`Worker.start` to :meth:`Worker.stop` the worker announces the fingerprints of
  its registered reactors and resumes the ``needs_version`` runs it can continue
  (:class:`reactor.jobs.announcements.Announcer`; docs/deploys.md, "Routing by version");
* with ``schedules``, a :class:`reactor.schedules.Scheduler` runs in a thread beside the
  handler threads (``reactor worker --schedules``; docs/schedules.md, "Running schedulers");
* :meth:`Worker.stop` (SIGTERM/SIGINT under :meth:`Worker.serve`) stops receiving and waits
  for the jobs in flight, slot jobs included, bounded by ``drain_timeout`` seconds.
"""

from __future__ import annotations

import importlib
import signal
import threading
import time
from collections.abc import Callable, Iterable
from types import FrameType

from reactor import config, registry
from reactor.config import Runtime
from reactor.engine import secret_policy
from reactor.engine.dispatch_leases import router_visibility
from reactor.errors import DeserializationError, UnknownReactorError
from reactor.jobs import observe, version_routing
from reactor.jobs.announcements import Announcer
from reactor.jobs.async_slots import SlotHost, check_available
from reactor.jobs.handlers import HANDLERS, JobContext, dispatch_job
from reactor.jobs.poisoned_runs import abort_poisoned_run
from reactor.jobs.slot_jobs import awaits_on_loop
from reactor.jobs.sweep_tick import schedule_next
from reactor.jobs.visibility import VisibilityLease
from reactor.model.text import escaping_logger
from reactor.ports.router import Delivery
from reactor.schedules.scheduler import Scheduler

__all__ = [
    "DEFAULT_MAX_DELIVERIES",
    "RECEIVE_BACKOFF_MAX",
    "Worker",
    "default_backoff",
    "receive_backoff",
]

log = escaping_logger("reactor.worker")

#: Deliveries of a failing job before it is dead-lettered.
DEFAULT_MAX_DELIVERIES = 5


#: The longest wait between two failed ``receive`` calls of a worker thread, in seconds.
RECEIVE_BACKOFF_MAX = 30.0


def receive_backoff(failures: int) -> float:
    """Seconds a worker thread waits after ``failures`` consecutive failed ``receive`` calls:
    0.5, 1, 2, 4, ... capped at :data:`RECEIVE_BACKOFF_MAX` (docs/workers.md, "Storage and
    router outages").

    Args:
        failures: consecutive failures so far (>= 1).

    Returns:
        The delay in seconds.
    """
    return float(min(0.5 * 2 ** max(failures - 1, 0), RECEIVE_BACKOFF_MAX))


def default_backoff(delivery_count: int) -> float:
    """Seconds before a failed job is retried: ``min(2 ** (n - 1), 60)`` for delivery ``n``."""
    return float(min(2 ** max(delivery_count - 1, 0), 60))


class Worker:
    """Runs jobs from ``runtime.router`` on ``threads`` handler threads.

    Args:
        runtime: the storage, router and settings (default :func:`reactor.config.current`).
        threads: handler threads (at least 1).
        import_modules: module names to import at :meth:`start` so their reactors register
            (operator-supplied; never taken from a message).
        sweep: also start the sweep chain (:func:`reactor.jobs.sweep_tick.schedule_next`).
        max_deliveries: deliveries of a failing job before it is dead-lettered.
        backoff: ``delivery_count -> seconds`` before a failed job is retried.
        poll_seconds: the longest a thread blocks in ``receive`` before re-checking stop.
        visibility: the delivery lease the heartbeat renews, in seconds (default: the router's
            ``visibility_timeout`` attribute, else ``settings.visibility_timeout``).
        drain_timeout: seconds :meth:`serve` waits for in-flight jobs after a stop signal.
        liveness_wait: seconds a run handler polls a held liveness lock before re-enqueueing.
        async_slots: jobs of async units in flight at once, each suspended while its body
            awaits instead of holding a thread (docs/workers.md, "Async slots"); ``0`` (the
            default) runs every job on its handler thread from start to end. Needs the
            ``greenlet`` package (the ``async-slots`` extra).
        announce: announce this worker's definitions while it is started and resume the
            ``needs_version`` runs they can continue (docs/deploys.md, "Routing by
            version"; default ``True``).
        schedules: also run a :class:`reactor.schedules.Scheduler` in a thread (the code
            schedules the imported modules register and the stored ones; docs/schedules.md,
            "Running schedulers").

    Attributes:
        processed: deliveries handled and acked.
        jobs_dead_lettered: deliveries *this worker* dead-lettered (poison jobs, or failing on
            ``max_deliveries``). A message the router cannot even decode as a job envelope is
            dead-lettered by the router inside ``receive`` and never reaches a worker, so it is
            not counted here; ``router.dead_letters()`` lists both kinds (the undecodable ones
            with an ``undecodable message`` reason).
        retried: deliveries given back to the router with a backoff.

    Raises:
        ValueError: a setting is out of range (the message names it).
        ConfigurationError: ``async_slots`` is set and ``greenlet`` is not installed.
    """

    def __init__(
        self,
        runtime: Runtime | None = None,
        threads: int = 1,
        import_modules: Iterable[str] = (),
        sweep: bool = False,
        *,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
        backoff: Callable[[int], float] = default_backoff,
        poll_seconds: float = 1.0,
        visibility: float | None = None,
        drain_timeout: float = 30.0,
        liveness_wait: float = 2.0,
        async_slots: int = 0,
        announce: bool = True,
        schedules: bool = False,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads!r}")
        if max_deliveries < 1:
            raise ValueError(f"max_deliveries must be >= 1, got {max_deliveries!r}")
        if isinstance(async_slots, bool) or not isinstance(async_slots, int) or async_slots < 0:
            raise ValueError(f"async_slots must be an integer >= 0, got {async_slots!r}")
        self.runtime = runtime or config.current()
        self.threads = threads
        self.import_modules = tuple(import_modules)
        self.sweep = sweep
        self.max_deliveries = max_deliveries
        self.backoff = backoff
        self.poll_seconds = poll_seconds
        self.visibility = float(visibility or router_visibility(self.runtime))
        self.drain_timeout = drain_timeout
        self.liveness_wait = liveness_wait
        self.async_slots = async_slots
        self.scheduler = Scheduler(self.runtime) if schedules else None
        if async_slots:
            check_available()
        self._slots = threading.BoundedSemaphore(async_slots) if async_slots else None
        self.announce = announce
        self._announcer: Announcer | None = None
        self._hosts: list[SlotHost] = []
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._in_flight = 0
        self.processed = 0
        self.jobs_dead_lettered = 0
        self.retried = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def import_user_modules(self) -> None:
        """Import :attr:`import_modules` so their reactors register (``--import``).

        Raises:
            ImportError: a module cannot be imported.
        """
        for name in self.import_modules:
            importlib.import_module(name)  # safe: operator-supplied module list

    def start(self) -> None:
        """Import the user modules, check that the worker can open their runs' secrets, start
        the handler threads and, with ``sweep``, the chain.

        Raises:
            ImportError: a user module cannot be imported.
            ConfigurationError: the registered reactors hold secrets and no key is configured
                (docs/security.md, "When a key is wrong or missing").
        """
        self.import_user_modules()
        secret_policy.check_worker(
            self.runtime, (registry.get(name).definition for name in registry.names())
        )
        self._stopping.clear()
        for n in range(self.threads):
            host = None
            if self._slots is not None:
                host = SlotHost(f"reactor-worker-{n + 1}-slots", self._run_in_slot,
                                self._stopping)
                self._hosts.append(host)
            thread = threading.Thread(
                target=self._loop, args=(host,), name=f"reactor-worker-{n + 1}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        # joined after the handler threads, which submit to them until they stop
        self._threads.extend(host.start() for host in self._hosts)
        if self.sweep:
            self._start_sweep_chain()
        if self.scheduler is not None:  # docs/schedules.md, "Running schedulers"
            self.scheduler.start()
        if self.announce:  # docs/deploys.md, "Routing by version"
            self._announcer = Announcer(
                self.runtime, on_renew=version_routing.resume_held
            ).start()
        log.info(
            "event=worker_started threads=%d async_slots=%d kinds=%s",
            self.threads, self.async_slots, ",".join(sorted(HANDLERS)),
        )

    def _start_sweep_chain(self) -> None:
        """Start the sweep chain (``--sweep``); an unreachable backend does not stop the worker
        (docs/workers.md, "Running workers"): a failed attempt is one warning line and the
        chain is retried in a background thread with :func:`receive_backoff` until it starts
        or the worker stops."""
        try:
            window = schedule_next(self.runtime)
        except Exception as exc:
            self._sweep_start_failed(1, exc)
            thread = threading.Thread(
                target=self._retry_sweep_chain, name="reactor-sweep-start", daemon=True
            )
            self._threads.append(thread)  # joined by stop()
            thread.start()
            return
        log.info("event=sweep_chain_started window=%s", window)

    def _retry_sweep_chain(self) -> None:
        failures = 1
        while not self._stopping.wait(receive_backoff(failures)):
            try:
                window = schedule_next(self.runtime)
            except Exception as exc:
                failures += 1
                self._sweep_start_failed(failures, exc)
                continue
            log.info(
                "event=sweep_chain_started window=%s after_attempts=%d", window, failures + 1
            )
            return

    @staticmethod
    def _sweep_start_failed(failures: int, exc: Exception) -> None:
        log.warning(
            "event=sweep_chain_start_failed attempt=%d retry_in=%.1f error=%s: %s",
            failures, receive_backoff(failures), type(exc).__name__, exc,
        )

    def stop(self, timeout: float | None = None) -> bool:
        """Stop receiving and wait for the jobs in flight.

        Args:
            timeout: seconds to wait in total (default :attr:`drain_timeout`).

        Returns:
            ``True`` when every handler thread finished within the timeout.
        """
        self._stopping.set()
        if self._announcer is not None:  # receives nothing more: handed-back jobs go elsewhere
            self._announcer.stop()
            self._announcer = None
        for host in self._hosts:
            host.nudge()
        deadline = time.monotonic() + (self.drain_timeout if timeout is None else timeout)
        if self.scheduler is not None:
            self.scheduler.stop(max(deadline - time.monotonic(), 0.0))
        threads, self._threads = self._threads, []
        self._hosts = []
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        alive = [t.name for t in threads if t.is_alive()]
        if alive:
            log.warning("event=worker_stop_timeout threads=%s", ",".join(alive))
        return not alive

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping.is_set()

    @property
    def in_flight(self) -> int:
        """Jobs being handled right now (slot jobs suspended on their body included)."""
        with self._lock:
            return self._in_flight

    def serve(self, *, install_signals: bool = True) -> int:
        """Run until SIGTERM/SIGINT (or :meth:`stop`), then drain; the process exit code.

        ``event=worker_stopping`` is logged once, for the first signal.

        Args:
            install_signals: install SIGTERM/SIGINT handlers (main thread only).

        Returns:
            0 after a clean drain, 1 when jobs were still running at ``drain_timeout``.
        """
        if install_signals and threading.current_thread() is threading.main_thread():

            def on_signal(signum: int, frame: FrameType | None) -> None:
                if self._stopping.is_set():  # a repeated signal: already draining
                    return
                log.info("event=worker_stopping signal=%d", signum)
                self._stopping.set()

            previous = {sig: signal.signal(sig, on_signal)
                        for sig in (signal.SIGTERM, signal.SIGINT)}
        else:
            previous = {}
        try:
            try:
                self.start()
            except BaseException:
                # Never leave handler threads logging into a process that is exiting (their
                # output would hit a closed stderr: "I/O operation on closed file").
                self.stop(timeout=self.poll_seconds + 1.0)
                raise
            while not self._stopping.wait(0.5):
                pass
            clean = self.stop()
        finally:  # the process's own handlers again once the worker is done
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("event=worker_stopped clean=%s processed=%d", clean, self.processed)
        return 0 if clean else 1

    # -- processing --------------------------------------------------------------------------

    def _loop(self, host: SlotHost | None = None) -> None:
        router = self.runtime.router
        failures = 0
        slots = self._slots
        while not self._stopping.is_set():
            # back-pressure: with every slot taken, receive nothing (docs/workers.md)
            if slots is not None and not slots.acquire(timeout=self.poll_seconds):
                continue
            try:
                deliveries = router.receive(1, wait_seconds=self.poll_seconds)
            except Exception as exc:
                if slots is not None:
                    slots.release()
                # An unreachable backend: one line per attempt, backing off (docs/workers.md).
                failures += 1
                delay = receive_backoff(failures)
                log.warning(
                    "event=receive_failed attempt=%d retry_in=%.1f error=%s: %s",
                    failures, delay, type(exc).__name__, exc,
                )
                self._stopping.wait(delay)
                continue
            if failures:
                log.info("event=receive_recovered after_attempts=%d", failures)
                failures = 0
            slot = slots is not None  # this thread holds one slot, for the first delivery
            for delivery in deliveries:
                if self._stopping.is_set():  # leased after the stop: give it back at once
                    self._safe(router.retry, delivery, 0.0)
                    continue
                if (slot and host is not None and awaits_on_loop(delivery.job)
                        and host.submit(delivery)):  # the slot is given back when it ends
                    slot = False
                    continue
                if slot and slots is not None:
                    slots.release()
                    slot = False
                self.process(delivery)
            if slot and slots is not None:
                slots.release()

    def _run_in_slot(self, delivery: Delivery) -> None:
        """Process a slot job on its host (suspended while its body awaits), then free its
        slot."""
        try:
            self.process(delivery)
        finally:
            if self._slots is not None:
                self._slots.release()

    def run_pending(self, max_jobs: int = 1000) -> int:
        """Receive and process due jobs in the calling thread until none is due (tests, scripts).

        Args:
            max_jobs: stop after this many jobs.

        Returns:
            How many deliveries were processed.
        """
        done = 0
        while done < max_jobs:
            deliveries = self.runtime.router.receive(1, wait_seconds=0)
            if not deliveries:
                return done
            for delivery in deliveries:
                self.process(delivery)
                done += 1
        return done

    def process(self, delivery: Delivery) -> None:
        """Run one delivery: dispatch, then ack, retry or dead-letter it. Never raises
        ``Exception`` (a worker thread must not die on a job)."""
        router = self.runtime.router
        job = delivery.job
        started = time.monotonic()
        with self._lock:
            self._in_flight += 1
        # The job's visibility is a lease like any other ("Renewal and loss" in
        # docs/coordination.md): renewed every third of it, retried promptly on errors; when it
        # lapses anyway another worker may receive the job (the run's liveness lock still
        # fences its writes), which is logged. A heartbeat step shortens it while it runs.
        heartbeat = VisibilityLease(router, delivery, self.visibility).start(started)
        try:
            dispatch_job(
                JobContext(
                    runtime=self.runtime, job=job, delivery=delivery,
                    liveness_wait=self.liveness_wait, visibility=heartbeat,
                )
            )
        except (DeserializationError, UnknownReactorError) as exc:
            heartbeat.stop()
            self._dead_letter(delivery, f"{type(exc).__name__}: {exc}")
            return
        except Exception as exc:
            heartbeat.stop()
            self._failed(delivery, exc)
            return
        finally:
            heartbeat.stop()
            with self._lock:
                self._in_flight -= 1
        self._safe(router.ack, delivery)
        self.processed += 1

    def _dead_letter(self, delivery: Delivery, reason: str) -> None:
        job = delivery.job
        log.warning(
            "event=dead_letter job_id=%s kind=%s reason=%s", job.id, job.kind, reason
        )
        self._safe(self.runtime.router.dead_letter, delivery, reason)
        self.jobs_dead_lettered += 1
        observe.dead_lettered(self.runtime, job, reason)

    def _failed(self, delivery: Delivery, exc: Exception) -> None:
        job = delivery.job
        reason = f"{type(exc).__name__}: {exc}"
        if delivery.delivery_count >= self.max_deliveries:
            letter = f"handler failed on {delivery.delivery_count} deliveries: {reason}"
            self._dead_letter(delivery, letter)
            # a run job's run would be re-dispatched into the same error: stored aborted
            abort_poisoned_run(self.runtime, job, exc, letter)
            return
        delay = self.backoff(delivery.delivery_count)
        log.warning(
            "event=job_failed job_id=%s kind=%s delivery=%d retry_in=%.1f error=%s",
            job.id, job.kind, delivery.delivery_count, delay, reason,
            exc_info=exc,
        )
        self._safe(self.runtime.router.retry, delivery, delay)
        self.retried += 1

    @staticmethod
    def _safe(action: Callable[..., None], delivery: Delivery, *args: object) -> None:
        try:
            action(delivery, *args)
        except Exception:
            log.exception("event=router_call_failed job_id=%s", delivery.job.id)
