"""The rate-limit client: multi-window fixed windows and a registry of named limits.

Semantics: ``docs/coordination.md`` (table, "Clock skew"). All windows are checked and charged
atomically by the store; a denial raises :class:`reactor.RateLimitExceeded` with
``retry_after`` seconds so a worker can park for exactly that long.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from reactor.errors import RateLimitExceeded, UnknownRateLimitError
from reactor.model.records import RateWindow
from reactor.ports.storage import RateLimitStore

__all__ = ["NAMED_WINDOWS", "RateLimit", "RateLimitRegistry", "registry", "windows_from"]

#: Window names accepted in ``limits={...}`` and their lengths in seconds.
NAMED_WINDOWS: Mapping[str, float] = {
    "second": 1.0,
    "minute": 60.0,
    "hour": 3600.0,
    "day": 86400.0,
}


def windows_from(
    limit: int | None = None,
    period: float | str | None = None,
    limits: Mapping[str | float, int] | None = None,
) -> tuple[RateWindow, ...]:
    """Build windows from ``limit``/``period`` or ``limits={"second": 3, "minute": 100}``.

    Args:
        limit: admissions per ``period`` (single-window form).
        period: window length in seconds, or a name from :data:`NAMED_WINDOWS`.
        limits: ``{window name or seconds: limit}`` (multi-window form).

    Raises:
        ValueError: neither or both forms given, an unknown window name, or a bad number.
    """
    if (limits is None) == (limit is None):
        raise ValueError("give either limit= with period=, or limits={window: limit}")
    pairs: list[tuple[str | float, int]] = (
        list(limits.items()) if limits is not None else [(period or "second", limit or 0)]
    )
    windows = []
    for spec, count in pairs:
        if isinstance(spec, str):
            if spec not in NAMED_WINDOWS:
                raise ValueError(
                    f"unknown rate-limit window {spec!r}; use one of {sorted(NAMED_WINDOWS)} "
                    "or a number of seconds"
                )
            windows.append(RateWindow(name=spec, seconds=NAMED_WINDOWS[spec], limit=count))
        else:
            windows.append(RateWindow(name=f"{spec:g}s", seconds=float(spec), limit=count))
    return tuple(windows)


class RateLimit:
    """A multi-window rate limit on one key.

    Args:
        store: the rate-limit sub-store.
        key: the limited key (e.g. ``"api:customer-42"``).
        windows: the windows, checked and charged all-or-none.
    """

    def __init__(self, store: RateLimitStore, key: str, windows: Sequence[RateWindow]) -> None:
        if not windows:
            raise ValueError("a rate limit needs at least one window")
        self.store = store
        self.key = key
        self.windows = tuple(windows)

    def hit(self) -> None:
        """Charge one admission to every window.

        Raises:
            RateLimitExceeded: a window is full; nothing was charged. ``retry_after`` is the
                seconds until that window rolls over (at least 0.1).
        """
        decision = self.store.hit(self.key, self.windows)
        if decision.allowed:
            return
        index = decision.window_index or 0
        window = self.windows[index]
        raise RateLimitExceeded(
            f"rate limit {self.key!r} exceeded: {window.limit} per {window.name}",
            key=self.key,
            retry_after=max(decision.retry_after, 0.1),
            window=window.name,
            limit=window.limit,
        )

    def counts(self) -> dict[str, int]:
        """Admissions charged in each window's current bucket, by window name."""
        return {w.name: self.store.count(self.key, w) for w in self.windows}


class RateLimitRegistry:
    """Named limits shared by every reactor that says ``with_rate_limit("name")``."""

    def __init__(self) -> None:
        self._limits: dict[str, tuple[RateWindow, ...]] = {}
        self._lock = threading.Lock()

    def register(
        self,
        name: str,
        *,
        limit: int | None = None,
        period: float | str | None = None,
        limits: Mapping[str | float, int] | None = None,
    ) -> tuple[RateWindow, ...]:
        """Register (or replace) a named limit; arguments as :func:`windows_from`."""
        windows = windows_from(limit, period, limits)
        with self._lock:
            self._limits[name] = windows
        return windows

    def windows(self, name: str) -> tuple[RateWindow, ...]:
        """The windows of a named limit.

        Raises:
            UnknownRateLimitError: no limit of that name is registered (a permanent error).
        """
        with self._lock:
            found = self._limits.get(name)
        if found is None:
            raise UnknownRateLimitError(f"no rate limit named {name!r} is registered")
        return found

    def clear(self) -> None:
        """Forget every named limit (tests)."""
        with self._lock:
            self._limits.clear()


#: The process-wide registry of named limits.
registry = RateLimitRegistry()
