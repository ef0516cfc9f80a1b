"""Three processes racing one idempotency key on Redis make one run: one run id for all,
the step body executed once (docs/run-control.md, "Idempotency keys"). Each racer is
:mod:`tests.kill.idempotency_race` in its own interpreter, released at the same instant.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import redis

from tests.kill.conftest import ROOT, with_query


def test_three_processes_racing_one_key_make_one_run(
    service_url: Callable[[str], str],
) -> None:
    token = f"idem{uuid.uuid4().hex[:10]}"
    url = with_query(service_url("redis"), prefix=token)
    start_at = time.time() + 3.0  # every interpreter is up and configured by then
    env = {k: v for k, v in os.environ.items()
           if k not in ("REACTOR_STORAGE_URL", "REACTOR_ROUTER_URL")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.kill.idempotency_race", url, str(start_at), "k-1"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(3)
    ]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        answers.append(out.split())
    assert len({a[0] for a in answers}) == 1, answers
    assert all(a[1:] == ["success", "charged", "o-1"] for a in answers), answers
    client = redis.Redis.from_url(service_url("redis"))
    try:
        assert client.get(f"{token}:bodies") == b"1"
    finally:
        client.close()
