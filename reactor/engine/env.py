"""``Env``: what one execution needs from the process — the runtime and the sleep hook.

The engine reaches storage and settings only through :func:`reactor.config.current` (or an
explicitly passed :class:`~reactor.config.Runtime`) and the :mod:`reactor.ports` protocols;
it never imports an adapter (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reactor import config
from reactor.config import Runtime, Settings
from reactor.engine import retries
from reactor.ports.storage import Storage

__all__ = ["Env", "make_env"]


@dataclass(frozen=True)
class Env:
    """The runtime and hooks of one execution (shared by composed children and map elements).

    Attributes:
        runtime: the storage, router and settings in use.
        sleep: the function retry waits go through (seconds); tests inject a fake.
        in_worker: ``True`` when the execution runs inside a worker job: coordination
            contention then raises :class:`reactor.engine.parks.Park` instead of waiting.
    """

    runtime: Runtime
    sleep: Callable[[float], None]
    in_worker: bool = False

    @property
    def storage(self) -> Storage:
        """The configured storage."""
        return self.runtime.storage

    @property
    def settings(self) -> Settings:
        """The engine settings."""
        return self.runtime.settings

    def now(self) -> float:
        """Epoch seconds on the storage clock."""
        return self.runtime.storage.now()


def make_env(
    runtime: Runtime | None = None, sleep: Callable[[float], None] | None = None
) -> Env:
    """Build an :class:`Env`.

    Args:
        runtime: the runtime; default :func:`reactor.config.current`.
        sleep: the retry sleep function; default :func:`reactor.engine.retries.default_sleep`
            (which reads the module-level hook :data:`reactor.engine.retries.sleep` at call
            time, so monkeypatching it works).

    Returns:
        The environment.
    """
    return Env(runtime=runtime or config.current(), sleep=sleep or retries.default_sleep)
