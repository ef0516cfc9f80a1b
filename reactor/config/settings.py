"""The settings schema: every engine knob, its default and its bounds (README, "Choosing a
backend"; docs/architecture.md, "Layers").

Only the schema lives here; reading ``REACTOR_<SETTING>`` variables is
:mod:`reactor.config.environment`, and the runtime that carries a :class:`Settings` is
:mod:`reactor.config.runtime`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from reactor.model.coordination.renewal import MIN_LEASE
from reactor.model.secrets import SecretKeys

__all__ = ["MIB", "Settings"]

#: One mebibyte, in bytes (the unit of :attr:`Settings.max_context_bytes`' default).
MIB = 1024 * 1024


class Settings(BaseModel):
    """Engine settings; every duration is in seconds.

    Attributes:
        context_ttl: retention of durable run state after its last write (default 86400).
        context_lock_ttl: TTL of liveness locks (``async:<id>`` etc.) in seconds, at least
            ``MIN_LEASE`` (1 s), renewed every ttl/3 (``docs/coordination.md``, "Renewal").
        lock_snooze_base_delay: base delay of a contention park.
        lock_snooze_jitter: random extra delay added to a park, ``0..jitter``.
        lock_snooze_max_attempts: parks allowed per unit before it gives up (ordered-lock waits
            are exempt); ``None`` = unbounded.
        async_wait_timeout: how long a synchronous reader of an async unit blocks.
        async_park_timeout: total parked time of a reader inside a worker, from dispatch.
        sweeper_interval: seconds between sweep ticks (the recovery-latency bound).
        sweeper_limit: records inspected per sweeper per tick (a tick of the sweep chain reads
            fewer on a slow backend: docs/workers.md, "Back-pressure and pace").
        sweeper_backlog: ready jobs in the router's queue at which a tick of the sweep chain
            re-dispatches nothing (``None``: never defer; docs/workers.md, "Back-pressure and
            pace").
        map_batch_size: fan-out elements dispatched per throw.
        rollback_chunk: positions per distributed-rollback batch and inline rollback chunk.
        max_context_bytes: the largest serialized context accepted before any write.
        checkpoint_min_interval: minimum seconds between per-step checkpoints (0 = every step).
        cancel_check_interval: minimum seconds between two reads of a running run's cancel
            request at its step boundaries (0 = at every boundary; docs/run-control.md,
            "Cancel"): a run of fast steps pays one read per interval, not one per step.
        visibility_timeout: default lease of a delivered job before it is redelivered.
        secret_keys: keys that encrypt redacted values at rest, first = current; each
            base64url of 32 bytes, optionally ``KID:KEY``; empty = ``REACTOR_SECRET_KEYS``
            (docs/security.md, "Keys").
        allow_plaintext_secrets: store redacted values in clear on a non-memory backend when
            no key is configured (logged once as a warning; docs/security.md, "Opting out").
        idempotency_key_ttl: seconds a run idempotency key names its run, counted from the
            run's creation; ``None`` (default) = ``context_ttl``, which also caps it (the
            claims store drops the key then; docs/run-control.md, "Idempotency keys").
        middleware: names of middleware registered in the ``reactor.middleware`` entry-point
            group (e.g. ``otel``) that the runtime runs, in order; ``REACTOR_MIDDLEWARE=otel``
            or ``-s middleware=otel`` (docs/observability.md, "Enabling it").
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    context_ttl: float = Field(86400.0, gt=0)
    context_lock_ttl: float = Field(60.0, ge=MIN_LEASE)
    lock_snooze_base_delay: float = Field(5.0, ge=0)
    lock_snooze_jitter: float = Field(5.0, ge=0)
    lock_snooze_max_attempts: int | None = Field(20, ge=0)
    async_wait_timeout: float = Field(30.0, gt=0)
    async_park_timeout: float | None = Field(3600.0, gt=0)
    sweeper_interval: float = Field(30.0, gt=0)
    sweeper_limit: int = Field(1000, ge=1)
    sweeper_backlog: int | None = Field(1000, ge=1)
    map_batch_size: int = Field(50, ge=1)
    rollback_chunk: int = Field(100, ge=1)
    max_context_bytes: int = Field(64 * MIB, ge=1024)
    checkpoint_min_interval: float = Field(0.0, ge=0)
    cancel_check_interval: float = Field(1.0, ge=0)
    visibility_timeout: float = Field(30.0, gt=0)
    secret_keys: SecretKeys = ()
    allow_plaintext_secrets: bool = False
    idempotency_key_ttl: float | None = Field(None, gt=0)
    middleware: tuple[str, ...] = ()
