"""``reactor info``: what the configured storage and router hold right now (docs/workers.md,
"Running workers").

Prints, on stdout: the reactor version, the storage and router in use (URLs with credentials
hidden, :func:`reactor.cli._common.display_url`, and the adapter class), the queue's ready,
delayed and in-flight jobs, the dead letters, the sweep index sizes and the live workers. A
figure comes from an optional capability of the adapter
(:class:`reactor.ports.inspection.QueueInspector`,
:class:`reactor.ports.inspection.SweepIndexInspector`); where the adapter has none it reads
``unknown``, except dead letters, which are counted through ``Router.dead_letters`` up to
:data:`DEAD_LETTER_COUNT_CAP`. Exit 1 with one stderr line when a backend fails.
"""

from __future__ import annotations

from collections.abc import Mapping

from reactor import config
from reactor.cli._common import (
    EXIT_FAILURE,
    RouterOpt,
    SettingOpt,
    StorageOpt,
    _runtime,
    app,
    console,
    display_url,
    fail,
    package_version,
)
from reactor.errors import ReactorError
from reactor.ports.inspection import QueueInspector, QueueStats, SweepIndexInspector

__all__ = ["DEAD_LETTER_COUNT_CAP", "UNKNOWN", "info", "info_lines"]

#: What ``reactor info`` prints for a figure the adapter cannot give cheaply.
UNKNOWN = "unknown"

#: The most dead letters counted through ``Router.dead_letters`` when the router has no
#: :class:`~reactor.ports.inspection.QueueInspector` (more shows as ``1000+``).
DEAD_LETTER_COUNT_CAP = 1000


def _figure(value: int | None) -> str:
    return UNKNOWN if value is None else str(value)


def info_lines(runtime: config.Runtime, storage_url: str, router_url: str) -> list[str]:
    """The lines ``reactor info`` prints for ``runtime``.

    Args:
        runtime: the configured storage and router.
        storage_url: the storage URL in use (shown with credentials hidden).
        router_url: the router URL in use (shown with credentials hidden).

    Returns:
        One ``label: value`` line per figure.

    Raises:
        ReactorError: a backend failed while answering (``StorageError``, ``RouterError``).
    """
    storage, router = runtime.storage, runtime.router
    stats = router.queue_stats() if isinstance(router, QueueInspector) else QueueStats()
    dead: str
    if stats.dead_letters is not None:
        dead = str(stats.dead_letters)
    else:
        count = len(router.dead_letters(limit=DEAD_LETTER_COUNT_CAP))
        dead = f"{count}+" if count >= DEAD_LETTER_COUNT_CAP else str(count)
    sizes: Mapping[str, int] | None = (
        storage.sweep_index_sizes() if isinstance(storage, SweepIndexInspector) else None
    )
    indexes = (
        " ".join(f"{name}={sizes.get(name, UNKNOWN)}"
                 for name in ("runs", "steps", "maps", "map_rollbacks"))
        if sizes is not None else UNKNOWN
    )
    return [
        f"reactor: {package_version()}",
        f"storage: {display_url(storage_url)} ({type(storage).__name__})",
        f"router: {display_url(router_url)} ({type(router).__name__})",
        f"queue: ready={_figure(stats.ready)} delayed={_figure(stats.delayed)} "
        f"in_flight={_figure(stats.in_flight)}",
        f"dead letters: {dead}",
        f"sweep indexes: {indexes}",
        f"live workers: {_figure(stats.consumers)}",
    ]


@app.command()
def info(
    storage: StorageOpt = None, router: RouterOpt = None, setting: SettingOpt = None
) -> None:
    """Show the storage and router in use, queue depth, dead letters and sweep index sizes.

    A figure the adapter cannot give cheaply reads "unknown". Exit 0, 1 when a backend fails,
    2 on a configuration error. See docs/workers.md, "Running workers".
    """
    runtime = _runtime(storage, router, setting)
    try:
        lines = info_lines(
            runtime, config.resolve_storage_url(storage), config.resolve_router_url(router)
        )
    except ReactorError as exc:
        reason = " ".join(str(exc).split())
        fail(f"{type(exc).__name__}: {reason}", EXIT_FAILURE)
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
