"""Obligations of the declarations concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_CAPABILITIES = 'docs/protocol.md, "Capabilities"'
_ADAPTER_CAPABILITIES = 'docs/writing-an-adapter.md, "Capabilities"'
_FAST_PATHS = 'docs/protocol.md, "Optional fast paths"'
_INSPECTION = 'docs/protocol.md, "Inspection capabilities"'
_DECLARED = 'docs/contract-suite.md, "Declarations are checked"'

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-declarations-1",
        "A storage declaring Capabilities.signals=True has a SignalStore in storage.signals; "
        "one declaring signals=False has storage.signals None (working signals are never left "
        "undeclared).",
        _CAPABILITIES,
    ),
    Obligation(
        "O-declarations-2",
        "A storage declaring max_document_bytes=N stores a context of exactly N bytes "
        "(ContextRecord.stored_bytes: the UTF-8 bytes of its document and segments, not the "
        "backend's encoding of it) and reads it back intact.",
        _ADAPTER_CAPABILITIES,
    ),
    Obligation(
        "O-declarations-3",
        "A storage declaring max_document_bytes=N refuses a context of N + 1 bytes with "
        "ContextTooLargeError and writes nothing of it.",
        _CAPABILITIES,
    ),
    Obligation(
        "O-declarations-4",
        "A storage declaring max_document_bytes=None stores a context of 1 MiB and reads it "
        "back intact.",
        _CAPABILITIES,
    ),
    Obligation(
        "O-declarations-5",
        "An append that brings a run to the declared max_document_bytes (to 1 MiB when None is "
        "declared) is stored whole: the run reads back with the appended segment.",
        _ADAPTER_CAPABILITIES,
    ),
    Obligation(
        "O-declarations-6",
        "A storage declaring clock=\"server\" judges time by a clock no client sets: the "
        "storage its probe's with_clock(clock) returns (if any) does not read clock() in "
        "now().",
        _ADAPTER_CAPABILITIES,
    ),
    Obligation(
        "O-declarations-7",
        "Capabilities.clock_skew is a finite number of seconds >= 0, and 0 when clock is "
        "\"server\".",
        _ADAPTER_CAPABILITIES,
    ),
    Obligation(
        "O-declarations-8",
        "keeps_data_in_process (reactor.ports.capabilities.InProcess) is a class attribute "
        "that is absent, False or exactly True (never another value the engine would read as "
        "not declared).",
        _CAPABILITIES,
    ),
    Obligation(
        "O-declarations-9",
        "A storage declaring keeps_data_in_process = True keeps what it is given in the "
        "process: another process opening the same URL and namespace reads nothing saved "
        "here.",
        _CAPABILITIES,
    ),
    Obligation(
        "O-declarations-10",
        "A router declaring keeps_data_in_process = True keeps its jobs in the process: another "
        "process opening the same URL and namespace receives no job queued here.",
        _CAPABILITIES,
    ),
    Obligation(
        "O-declarations-11",
        "A fast-path protocol of storage.contexts or storage.maps (SavesContextsTogether, "
        "LocksWithContexts, ReadsClaimsWhenTaking, ReadsClaimsWhenAppending, "
        "BeginsAndSettlesElements, SettlesAndReleases) is declared whole: every member of it "
        "is there, or none is.",
        _ADAPTER_CAPABILITIES,
    ),
    Obligation(
        "O-declarations-12",
        "save_many(records) (SavesContextsTogether) saves every record it is given, each as an "
        "unfenced save(record) would.",
        _FAST_PATHS,
    ),
    Obligation(
        "O-declarations-13",
        "load_taking_claims(context_id, claim, step_paths) (ReadsClaimsWhenTaking) takes the "
        "lock as load_taking does and, only when granted, returns the record and the claimed "
        "interrupt-resume payloads among step_paths, and only those; under another owner's "
        "lock it reads nothing and returns token 0.",
        _FAST_PATHS,
    ),
    Obligation(
        "O-declarations-14",
        "append_reading_claims(delta, fence, step_paths) (ReadsClaimsWhenAppending) appends the "
        "delta and, only when it appended, returns the claimed interrupt-resume payloads among "
        "step_paths; a refused append (a stale fence) writes nothing and returns False with no "
        "claims.",
        _FAST_PATHS,
    ),
    Obligation(
        "O-declarations-15",
        "An optional router protocol (DeadLetterAdmin, EnqueuesMany, QueueInspector, Pingable, "
        "BoundedNativeDelay) is declared whole: every member of it is there, or none is.",
        _DECLARED,
    ),
    Obligation(
        "O-declarations-16",
        "A storage declaring Pingable answers ping() (one round trip); on a closed storage "
        "ping() works or raises StorageError, never a driver exception.",
        _INSPECTION,
    ),
    Obligation(
        "O-declarations-17",
        "A router declaring Pingable answers ping() (one round trip); on a closed router "
        "ping() works or raises RouterError, never a driver exception.",
        _INSPECTION,
    ),
    Obligation(
        "O-declarations-18",
        "sweep_index_sizes() (SweepIndexInspector) names only the runs, steps, maps and "
        "map_rollbacks indexes with int counts >= 0, and counts what this storage holds: a "
        "running run and a dispatched step add one each to runs and steps.",
        _INSPECTION,
    ),
    Obligation(
        "O-declarations-19",
        "queue_stats() (QueueInspector) counts this router's queue within 15 s (each count None "
        "where unknown): a due and a delayed job are ready=1, delayed=1, in_flight=0; once the "
        "due one is received, ready=0, in_flight=1; once it is acked, in_flight=0.",
        _INSPECTION,
    ),
    Obligation(
        "O-declarations-20",
        "A router honours any finite delay whole (a transport maximum is re-deferred through "
        "Job.not_before, and a router with a native limit declares BoundedNativeDelay): a job "
        "enqueued with a 7200 s delay is not delivered before one of 3 s.",
        _DECLARED,
    ),
    Obligation(
        "O-declarations-21",
        "A router declaring BoundedNativeDelay reads back in native_delay_limit the limit "
        "limit_native_delay(seconds) set.",
        _CAPABILITIES,
    ),
    Obligation(
        "O-declarations-22",
        "A router declaring BoundedNativeDelay honours an enqueue delay beyond its native limit "
        "whole: lowered to 1 s, a job enqueued with a 4 s delay comes no earlier than 3.5 s.",
        _CAPABILITIES,
    ),
    Obligation(
        "O-declarations-23",
        "A router declaring BoundedNativeDelay honours a retry delay beyond its native limit "
        "whole: lowered to 1 s, a job retried with a 4 s delay comes no earlier than 3.5 s.",
        _CAPABILITIES,
    ),
)
