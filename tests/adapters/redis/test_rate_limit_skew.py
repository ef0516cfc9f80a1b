"""The Redis rate-limit scripts follow the pure model's clock-skew rule.

See docs/coordination.md#clock-skew.

Redis reads one clock (``TIME``), so a stored bucket newer than the caller's never happens in
use; these tests plant one directly in the hash and check ``rate_limit.lua`` and
``rate_limit_count.lua`` decide exactly as :func:`reactor.model.coordination.rate_limits.hit`:
the newer bucket is the effective one, is never overwritten by the caller's older bucket, and a
denial records a bucket it reached. Windows are an hour or longer, so no boundary falls inside a
test.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactor.model.coordination import rate_limits as model
from reactor.model.records import RateWindow

pytestmark = pytest.mark.redis

reactor_redis = pytest.importorskip("reactor_redis")

HOUR = RateWindow("hour", 3600.0, 1)
US = 1_000_000


@pytest.fixture
def storage(service_url: Callable[[str], str]) -> Iterator[Any]:
    """A Redis storage in a fresh namespace on the scripts/test server."""
    url = service_url("redis")
    built = reactor_redis.storage_from_url(
        f"{url}{'&' if '?' in url else '?'}prefix=skew{uuid.uuid4().hex[:10]}"
    )
    try:
        yield built
    finally:
        built.close()


def _hash(storage: Any, key: str) -> dict[str, str]:
    found: dict[str, str] = storage.client.hgetall(storage.keys.rate_limit(key))
    return found


def _plant(storage: Any, key: str, window: RateWindow, bucket: int, count: int) -> None:
    """Store a counter of ``bucket`` (in the scripts' µs layout), expiring in two windows."""
    wid = model.window_id(window)
    expires = (storage.now() + 2 * window.seconds) * US
    storage.client.hset(
        storage.keys.rate_limit(key),
        mapping={wid: count, f"{wid}|b": bucket, f"{wid}|x": f"{expires:.0f}"},
    )


def _own_bucket(storage: Any, window: RateWindow) -> int:
    return math.floor(storage.now() / window.seconds)


def test_a_stored_newer_bucket_is_effective_and_denies_like_the_model(storage: Any) -> None:
    key = "k"
    own = _own_bucket(storage, HOUR)
    _plant(storage, key, HOUR, own + 1, 1)
    now = storage.now()
    decision = storage.rate_limits.hit(key, [HOUR])
    state = model.RateCounters(
        {model.window_id(HOUR): model.WindowCounter(own + 1, 1, now + 2 * HOUR.seconds)}
    )
    _, expected = model.hit(state, now, [HOUR])
    assert (decision.allowed, decision.window_index) == (False, 0)
    assert decision.retry_after == pytest.approx(expected.retry_after, abs=1.0)
    assert HOUR.seconds < decision.retry_after <= 2 * HOUR.seconds  # to the end of own + 1
    assert storage.rate_limits.count(key, HOUR) == 1
    assert _hash(storage, key)[f"{model.window_id(HOUR)}|b"] == str(own + 1)


def test_a_caller_behind_is_charged_in_the_newer_bucket(storage: Any) -> None:
    key = "k"
    window = RateWindow("hour", 3600.0, 2)
    own = _own_bucket(storage, window)
    _plant(storage, key, window, own + 1, 1)
    assert storage.rate_limits.hit(key, [window]).allowed is True
    stored = _hash(storage, key)
    wid = model.window_id(window)
    assert (stored[wid], stored[f"{wid}|b"]) == ("2", str(own + 1))
    assert storage.rate_limits.count(key, window) == 2
    assert storage.rate_limits.hit(key, [window]).allowed is False


def test_an_older_stored_bucket_is_replaced(storage: Any) -> None:
    key = "k"
    own = _own_bucket(storage, HOUR)
    _plant(storage, key, HOUR, own - 1, 1)
    assert storage.rate_limits.count(key, HOUR) == 0
    assert storage.rate_limits.hit(key, [HOUR]).allowed is True
    wid = model.window_id(HOUR)
    assert _hash(storage, key)[f"{wid}|b"] == str(own)


def test_a_denial_records_the_bucket_it_reached(storage: Any) -> None:
    key = "k"
    open_window, closed = RateWindow("open", 3600.0, 5), RateWindow("closed", 1e9, 0)
    decision = storage.rate_limits.hit(key, [open_window, closed])
    assert (decision.allowed, decision.window_index) == (False, 1)
    stored = _hash(storage, key)
    wid = model.window_id(open_window)
    assert (stored[wid], stored[f"{wid}|b"]) == ("0", str(_own_bucket(storage, open_window)))
    assert storage.rate_limits.count(key, open_window) == 0
    ttl = storage.client.pttl(storage.keys.rate_limit(key))
    # the native expiry follows the latest counter (PEXPIREAT rounds up to the next ms)
    assert 0 < ttl <= 2 * 1e9 * 1000 + 1
    again = storage.rate_limits.hit(key, [open_window, closed])
    assert again.window_index == 1 and _hash(storage, key) == stored  # nothing new to record
