"""Fan-out map scale on Redis: elements/s forward and backward, peak RSS of owner and workers.

Issue 8 "Prove it": a map of N elements (default 1,000 and 10,000) fans out to 2 real
``reactor worker`` processes (4 handler threads each) on Redis, then a later step fails, so the
whole map is rolled back through the distributed rollback (one ``map_element_rollback`` job per
element). For each N it prints:

* forward elements/s: from ``run()`` until the rollback starts (every element settled, the
  collector resumed the owner, the owner adopted the map and ran the failing step);
* backward elements/s: from the rollback's ``started_at`` until the run is ``failed``;
* peak RSS (``VmHWM``) of each worker process (fresh processes per N: they run the elements,
  the collector, the rollback jobs **and the owner's resumes**);
* the owner side measured in this process: the peak RSS of this process (it runs the owner up
  to the map and dispatches the first throw) and the ``tracemalloc`` peak of the owner's reads
  after the run: enumerating every result (``MapResultEnumerator``, pages of 500) and
  aggregating the rollback (``map_rollback.aggregate``, pages of 500). Neither may grow with N
  beyond the source list itself (N small ints in the owner's context).

Usage: ``python benchmarks/fan_out_scale.py redis://127.0.0.1:PORT/0 [N ...]``. Use a server
nobody else is using; no assertions (the test suite's ``tests/kill/test_map_scale.py`` is the
CI variant).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from reactor import (
    DispatchHandle,
    FanOut,
    Input,
    MapResultEnumerator,
    Reactor,
    config,
    element,
    input,
    map_step,
    result,
    step,
)

ROOT = Path(__file__).resolve().parents[1]
WORKERS = 2
THREADS = 4
BATCH_SIZE = 50


class ScaleElement(Reactor, name="bench.fan_out.element"):
    """One element: a trivial step with a trivial undo."""

    n = Input(int)

    @step(n=input("n"))
    def work(inputs: Any, ctx: Any) -> int:
        return int(inputs.n) + 1

    @work.undo
    def unwork(value: Any, inputs: Any, ctx: Any) -> None:
        return None

    returns = "work"


class ScaleOwner(Reactor, name="bench.fan_out.owner"):
    """``items`` -> fan-out map ``m`` -> ``after`` (fails: the whole map is rolled back)."""

    count = Input(int)

    @step(count=input("count"))
    def items(inputs: Any, ctx: Any) -> list[int]:
        return list(range(inputs.count))

    m = map_step(ScaleElement, source=result("items"), args={"n": element("m")},
                 fan_out=FanOut(batch_size=BATCH_SIZE))

    @step(m=result("m"))
    def after(inputs: Any, ctx: Any) -> None:
        raise RuntimeError("roll the map back")


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _workers(url: str) -> list[subprocess.Popen[bytes]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")]))
    args = [sys.executable, "-m", "reactor.cli", "worker", "--import", "fan_out_scale",
            "--storage", url, "--router", url, "--threads", str(THREADS)]
    return [subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for _ in range(WORKERS)]


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def run_once(base_url: str, count: int) -> dict[str, Any]:
    """One measured run of ``count`` elements under a fresh key prefix."""
    from reactor.engine.env import make_env
    from reactor.engine.maps.rollback import aggregate

    url = base_url + ("&" if "?" in base_url else "?") + f"prefix=fanout{uuid.uuid4().hex[:8]}"
    runtime = config.configure(storage=url, router=url)
    procs = _workers(url)
    try:
        started = runtime.storage.now()
        handle = ScaleOwner.run(count=count)
        assert isinstance(handle, DispatchHandle), handle
        rollbacks = runtime.storage.map_rollbacks
        _wait(lambda: rollbacks.scan() != [], 3600, "the forward map")
        (meta,) = rollbacks.scan()
        forward = meta.started_at - started
        _wait(lambda: handle.status().value == "failed", 3600, "the rollback")
        backward = runtime.storage.now() - meta.started_at
        worker_rss = [_peak_rss_kib(p.pid) for p in procs]
        # the owner's bounded reads, measured here: every result, then the rollback aggregate
        tracemalloc.start()
        mapped = MapResultEnumerator(meta.map_id, count)
        ok = sum(1 for _ in mapped.successes())
        failures = aggregate(make_env(runtime), "m", meta.map_id, started=count)
        _current, owner_reads_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert ok == count and failures == [], (ok, failures)
        return {
            "count": count,
            "forward_per_s": count / forward,
            "backward_per_s": count / backward,
            "worker_rss_mib": [kib / 1024 for kib in worker_rss],
            "owner_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "owner_reads_peak_kib": owner_reads_peak / 1024,
        }
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)
        config.reset()


def main(url: str, sizes: list[int]) -> None:
    """Run every size and print one line per size."""
    print(f"fan-out scale on {url}: {WORKERS} worker processes x {THREADS} threads, "
          f"batch size {BATCH_SIZE}")
    for count in sizes:
        row = run_once(url, count)
        workers = ", ".join(f"{mib:.1f}" for mib in row["worker_rss_mib"])
        print(f"  {row['count']:>6} elements: forward {row['forward_per_s']:7.1f} el/s, "
              f"backward {row['backward_per_s']:7.1f} el/s | peak RSS owner process "
              f"{row['owner_rss_mib']:.1f} MiB (owner reads peak "
              f"{row['owner_reads_peak_kib']:.0f} KiB), workers [{workers}] MiB")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python benchmarks/fan_out_scale.py redis://HOST:PORT/DB [N ...]")
    main(sys.argv[1], [int(n) for n in sys.argv[2:]] or [1000, 10000])
