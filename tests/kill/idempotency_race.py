"""One racer of ``tests/kill/test_idempotency_processes.py``: run :class:`Charged` with an
idempotency key at a given instant and print ``<run id> <status> <value>``.

Usage: ``python -m tests.kill.idempotency_race REDIS_URL START_AT KEY`` (``START_AT``: epoch
seconds every racer waits for, so the claims really race). Each step body counts itself with
``INCR <prefix>:bodies`` in the same Redis, so the test sees executions across processes.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import redis

from reactor import Input, Reactor, config, input, step

_counter: dict[str, Any] = {}


class Charged(Reactor, name="tests.kill.idempotency_race.charged"):
    order_id = Input(str)
    returns = "charge"

    @step(order_id=input("order_id"))
    def charge(inputs: Any, ctx: Any) -> str:
        _counter["client"].incr(_counter["key"])
        time.sleep(0.5)  # the other racers meet a run in progress
        return f"charged {inputs.order_id}"


def main(url: str, start_at: float, key: str) -> None:
    """Race once: configure Redis, wait for ``start_at``, run with ``key``, print the answer."""
    prefix = url.rsplit("prefix=", 1)[-1]
    _counter["client"] = redis.Redis.from_url(url.split("?", 1)[0])
    _counter["key"] = f"{prefix}:bodies"
    config.configure(storage=url, router=url)
    time.sleep(max(0.0, start_at - time.time()))
    outcome = Charged.run(order_id="o-1", idempotency_key=key)
    status = "success" if outcome.success else "failure"
    print(outcome.run_id, status, getattr(outcome, "value", None), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3])
