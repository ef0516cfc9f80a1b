"""``./scripts/demo --dashboard``: run the demo, then leave the dashboard up on its runs.

``python -m examples.order_fulfilment.dashboard [--host H] [--port N] [--token T] [demo
options]`` runs the demo exactly as ``python -m examples.order_fulfilment`` does (every other
option is the demo's: ``--limit 150``, ``--workers 2``...), then serves the operator dashboard
(docs/dashboard.md) in the same process, on the runs the demo left in its storage, until
Ctrl-C. By default that is the embedded memory storage: the runs live only in this process's
memory, which is why the dashboard runs here rather than as ``reactor dashboard`` (with
``REACTOR_STORAGE_URL`` set, ``reactor dashboard`` can show them too). Each order's run page
has the coordination panel of the demo's carrier semaphore, each ``reserve`` element's the
lock of its SKU (docs/dashboard.md, "Coordination view").

A fresh set of fake services is installed after the demo, so a failed order retried from the
dashboard runs again (a declined card still declines). Without ``--token`` the dashboard is
read-only; with one, sign in on the page to retry, undo or resume.

A scheduled run is there too: the ``settlement`` schedule (:mod:`.schedules`, every minute)
runs in a scheduler and a worker thread of this process while the dashboard is up; its first
run has finished before the address is printed, so ``/schedules`` shows its last run, last
tick and next tick at once (docs/dashboard.md, "Schedules"). Pause and resume it from there.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from reactor import config
from reactor.dashboard import serve

from .run import main as run_demo_main
from .schedules import start_settlement
from .services import SERVICES, Services

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo, then serve the dashboard until interrupted.

    Returns:
        The demo's exit code once the dashboard stops (2 on bad options).
    """
    parser = argparse.ArgumentParser(
        prog="scripts/demo --dashboard",
        description="Run the order fulfilment demo, then serve the dashboard on its runs.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: "
                        "127.0.0.1, this host only)")
    parser.add_argument("--port", type=int, default=8800, help="TCP port (default 8800)")
    parser.add_argument("--token", default=None,
                        help="enables actions (sign in with it); default: read-only")
    args, rest = parser.parse_known_args(argv)
    code = run_demo_main(rest)
    runtime = config.current()
    SERVICES.install(Services.create())
    scheduled = start_settlement(runtime)
    try:
        view = scheduled.wait_first_run()
        status = view.last_run_status.value if view.last_run_status else "not run yet"
        print(f"\nschedule {view.name!r} ({view.spec}): last run {view.last_run_id} "
              f"{status}; see /schedules", file=sys.stderr, flush=True)
        mode = "actions enabled: sign in with your token" if args.token else "read-only"
        print(f"dashboard on http://{args.host}:{args.port}/runs ({mode}); Ctrl-C to stop",
              file=sys.stderr, flush=True)
        serve(runtime, host=args.host, port=args.port, token=args.token)
    finally:
        scheduled.stop()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
