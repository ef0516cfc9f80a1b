"""Starts a SecantusDB server (MongoDB wire protocol) for the test suite and waits for SIGTERM.

Usage: ``python scripts/secantus_launcher.py HOST PORT``

Why a launcher: the ``secantusd-py`` CLI of secantusdb 0.7.0b3 ignores ``ttl_sweep_seconds``, and
the tests want the TTL monitor to sweep every second. Storage is
in memory, so nothing is left on disk. SecantusDB is a test-only dependency (GPL-2.0): it is
never imported by the ``reactor`` package.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType


def main(argv: list[str]) -> int:
    """Runs the server on ``argv[0]:argv[1]`` until SIGTERM or SIGINT; returns the exit code."""
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    host, port = argv[0], int(argv[1])
    from secantus import SecantusDBServer  # type: ignore[import-untyped]

    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    server = SecantusDBServer(host=host, port=port, storage_path=":memory:", ttl_sweep_seconds=1)
    server.start()
    print(f"secantus listening on {server.uri}", flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
