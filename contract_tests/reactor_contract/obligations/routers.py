"""Obligations of the routers concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_ROUTERS = 'docs/protocol.md, "Routers"'
_BUILDING = 'docs/protocol.md, "Building a router"'
_FAST = 'docs/protocol.md, "Optional fast paths"'
_PROTOCOLS = 'docs/writing-an-adapter.md, "1. The protocols"'
_ENTRY_POINTS = 'docs/writing-an-adapter.md, "3. Registering entry points"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-routers-1",
        "enqueue(job) queues the job and returns its id.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-2",
        "A delivery carries the job as it was enqueued (id, kind, payload, attempt) and "
        "delivery_count 1 on its first delivery.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-3",
        "receive on a queue with no due job returns [].",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-4",
        "receive(max_jobs) leases at most max_jobs due jobs, and repeated receives deliver "
        "every queued job.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-5",
        "receive(wait_seconds=w) waits up to w seconds for a job: a job enqueued during the "
        "wait is returned by that call.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-6",
        "A job enqueued with delay_seconds=d is not delivered before d seconds have passed.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-7",
        "Any finite delay >= 0 is accepted, however long (two hours), and holds the job back.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-8",
        "enqueue and retry raise ValueError for a negative, infinite or NaN delay.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-9",
        "A job not acked within its visibility timeout is not delivered again while its lease "
        "holds, and is delivered again after it with a new receipt and delivery_count one "
        "higher.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-10",
        "A job is leased to one receiver at a time: concurrent receives never hand out the "
        "same delivery (one job with one delivery_count) twice.",
        _BUILDING,
        checked="probabilistic",
        how="8 threads released together by a barrier (spinning until all are awake), with "
        "the thread switch interval cut to 1 µs, receive 3 jobs at a time from one queue of "
        "40 until every job was seen (one race per run)",
    ),
    Obligation(
        "O-routers-11",
        "ack(delivery) removes the job for good: it is never delivered again.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-12",
        "retry(delivery, d) gives the job back to be delivered again, not before d seconds "
        "(a retry of 0 redelivers it now); other jobs keep being delivered meanwhile.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-13",
        "retry keeps the delivery count and the job: the next delivery has delivery_count one "
        "higher than the retried one, whatever the delay, and the job unchanged (no new "
        "attempt); a lapsed lease after a retry counts on top of it.",
        _PROTOCOLS,
    ),
    Obligation(
        "O-routers-14",
        "extend(delivery, s) keeps the job invisible s seconds from now, past the visibility "
        "timeout.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-15",
        "dead_letter(delivery, reason) moves the job to the dead-letter place with the reason "
        "and its body, and acks it: it is never delivered again.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-16",
        "dead_letters(limit) lists the dead letters oldest first, at most limit, each with its "
        "reason and raw body.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-17",
        "A message Job.from_json rejects (not JSON, not UTF-8, nested too deep, not an object, "
        "a field missing or of the wrong shape) is dead-lettered inside receive with a reason "
        "saying why and its raw body (text, or base64 with body_encoding 'base64' when not "
        "UTF-8), removed from the queue and never returned.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-18",
        "A poison message never makes receive raise and never holds up the jobs queued before "
        "or behind it.",
        _PROTOCOLS,
    ),
    Obligation(
        "O-routers-19",
        "ack, retry, extend and dead_letter with a stale receipt (its job was delivered again "
        "since) change nothing: the job stays leased to the current delivery, comes back when "
        "that lease lapses, and nothing is dead-lettered.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-20",
        "A stale receipt's ack, retry, extend or dead_letter returns None and raises nothing, "
        "and afterwards the current delivery's ack still removes the job for good; a receipt "
        "already acked is stale too.",
        _PROTOCOLS,
    ),
    Obligation(
        "O-routers-21",
        "A lease that lapsed but was not redelivered yet is still current: its ack removes "
        "the job for good.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-22",
        "close() is idempotent.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-23",
        "A backend failure raises RouterError, never a driver's exception: on a closed router "
        "enqueue, enqueue_many, receive and dead_letters each work or raise RouterError.",
        _ROUTERS,
    ),
    Obligation(
        "O-routers-24",
        "A router opened with another prefix shares no job and no dead letter with this one.",
        _ENTRY_POINTS,
    ),
    Obligation(
        "O-routers-25",
        "enqueue_many(jobs) (or enqueue of each job) queues every job, each visible at once, "
        "and returns their ids in order ([] for no job).",
        _FAST,
    ),
    Obligation(
        "O-routers-26",
        "A job whose envelope is larger than MAX_ENVELOPE_BYTES raises EncodeError and is not "
        "queued, nor is any job after it in a batch; a native enqueue_many encodes every "
        "envelope before it sends one, so it queues none of the batch.",
        _ROUTERS,
    ),
)
