"""Per-step cost as a saga grows, and bytes written per run (docs/protocol.md, "Incremental
checkpoints").

For each storage given (default: ``memory://``, plus ``--redis URL`` and ``--sqlite PATH``
when passed), runs chains of 10, 100 and 1,000 trivial steps synchronously and prints the
best-of-3 mean time per step and its ratio to the 10-step figure, and the marginal cost of a
step between consecutive sizes (a run's fixed cost cancels out; flat is 1.00). A saga whose
first step returns 1 MB followed by 20 trivial steps shows the bytes the run wrote (base
documents and segments, as the store received them) against the 1 MB result.
Each figure is a ratio in the same process against the same storage; nothing is asserted.

Usage::

    .venv/bin/python benchmarks/step_scaling.py [--redis redis://127.0.0.1:6379/0]
        [--sqlite /tmp/steps.db] [--sizes 10,100,1000]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import time
from typing import Any

from _sagas import chain

from reactor import Reactor, config
from reactor.dsl import step

_BLOB = "x" * 1_000_000


def _blob(inputs: Any, ctx: Any) -> str:
    return _BLOB


def _one(inputs: Any, ctx: Any) -> int:
    return 1


@functools.cache
def big_first() -> type[Reactor]:
    """A 1 MB result, then 20 trivial steps."""
    namespace: dict[str, Any] = {"__module__": __name__, "first": step(_blob)}
    for i in range(20):
        namespace[f"s{i}"] = step(_one)
    return type("BigFirst", (Reactor,), namespace)


def per_step_us(reactor: type[Reactor], n: int) -> float:
    """Best of three mean µs per step over enough runs for ~2,000 steps."""
    reactor.run(start=0)
    runs = max(1, 2000 // n)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(runs):
            reactor.run(start=0)
        best = min(best, (time.perf_counter() - started) / runs / n * 1e6)
    return best


class _CountingContexts:
    """Counts the bytes a context store receives (documents, segments)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.written = 0

    def save(self, record: Any, **fence: Any) -> None:
        self.written += record.stored_bytes
        self.inner.save(record, **fence)

    def append(self, delta: Any, **fence: Any) -> bool:
        self.written += len(delta.segment.encode("utf-8"))
        return bool(self.inner.append(delta, **fence))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def bytes_written(storage: Any) -> int:
    """Bytes of contexts one run of :func:`big_first` writes."""
    counting = _CountingContexts(storage.contexts)
    storage.contexts = counting
    try:
        big_first().run()
    finally:
        storage.contexts = counting.inner
    return counting.written


#: One reactor class per size for the whole process (the registry names it once).
_chain = functools.cache(chain)


def measure(url: str, sizes: list[int]) -> None:
    """Print the per-step figures and the bytes written on storage ``url``."""
    runtime = config.configure(storage=url, router="local://")
    try:
        figures = {n: per_step_us(_chain(n), n) for n in sizes}
        base = figures[sizes[0]]
        print(f"storage {url.split('?')[0]}")
        for n, us in figures.items():
            print(f"  {n:>5} steps: {us:8.1f} us/step  ({us / base:.2f}x the {sizes[0]}-step cost)")
        # The marginal cost of one more step, between consecutive sizes: a run's fixed cost
        # (validation, its lock, the first whole save) cancels out.
        pairs = list(itertools.pairwise(sizes))
        marginal = [(figures[b] * b - figures[a] * a) / (b - a) for a, b in pairs]
        for (a, b), us in zip(pairs, marginal, strict=True):
            print(f"  marginal, {a} -> {b} steps: {us:8.1f} us/step "
                  f"({us / marginal[0]:.2f}x the first)")
        written = bytes_written(runtime.storage)
        print(f"  1 MB result + 20 steps: {written:,} bytes written "
              f"({written / len(_BLOB):.2f}x the result)")
    finally:
        config.reset()


def main() -> None:
    """Parse the arguments and measure every storage asked for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", help="a Redis URL to measure too")
    parser.add_argument("--sqlite", help="a SQLite file path to measure too")
    parser.add_argument("--sizes", default="10,100,1000", help="comma-separated step counts")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    urls = ["memory://"]
    if args.redis:
        urls.append(args.redis)
    if args.sqlite:
        urls.append(f"sqlite://{args.sqlite}")
    for url in urls:
        measure(url, sizes)


if __name__ == "__main__":
    main()
