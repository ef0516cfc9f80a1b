"""Hypothesis properties of the coordination state machines (docs/contract-suite.md)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from reactor.model.coordination import locks, ordered_locks, rate_limits, semaphores
from reactor.model.coordination.rate_limits import bucket_of
from reactor.model.records import OrderedTicket, RateWindow

OWNERS = st.sampled_from(["a", "b", "c"])
STEP = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)
TTLS = st.one_of(st.none(), st.floats(min_value=0.1, max_value=10.0))

lock_ops = st.lists(
    st.tuples(st.sampled_from(["acquire", "release", "extend"]), OWNERS, TTLS, STEP),
    max_size=60,
)


@given(lock_ops)
def test_lock_never_has_two_owners_and_counts_match(
    ops: list[tuple[str, str, float | None, float]],
) -> None:
    state: locks.LockState | None = None
    now = 0.0
    expected_count = 0
    issued: list[int] = []
    for op, owner, ttl, step in ops:
        now += step
        before = locks.live(state, now)
        if before is None:
            expected_count = 0
        if op == "acquire":
            state, token = locks.acquire(state, now, owner, ttl)
            ok = token > 0
            assert ok == (before is None or before.owner == owner)
            if ok:
                expected_count += 1
                if before is None:  # fresh: greater than every token ever issued
                    assert all(token > earlier for earlier in issued)
                    issued.append(token)
                else:  # re-entry keeps the holder's token
                    assert token == before.token
                info = locks.info(state, now)
                assert info is not None and info.token == token
        elif op == "release":
            state, ok = locks.release(state, now, owner)
            assert ok == (before is not None and before.owner == owner)
            if ok:
                expected_count -= 1
        else:
            state, ok = locks.extend(state, now, owner, ttl)
            assert ok == (before is not None and before.owner == owner)
        after = locks.live(state, now)
        if after is None:
            assert expected_count == 0
        else:
            assert after.count == expected_count >= 1
            if before is not None:
                assert after.owner == before.owner  # nobody steals a live lock


sem_ops = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "release", "extend"]),
        st.sampled_from([f"h{i}" for i in range(6)]),
        st.floats(min_value=0.5, max_value=10.0),
        STEP,
    ),
    max_size=80,
)


@given(st.integers(min_value=0, max_value=4), sem_ops)
def test_semaphore_never_exceeds_limit(
    limit: int, ops: list[tuple[str, str, float, float]]
) -> None:
    state: semaphores.SemaphoreLeases | None = None
    now = 0.0
    for op, holder, lease, step in ops:
        now += step
        before = semaphores.live(state, now)
        if op == "acquire":
            state, ok = semaphores.acquire(state, now, holder, limit, lease)
            had = before is not None and holder in before.holders
            used = 0 if before is None else len(before.holders)
            assert ok == (had or used < limit)
        elif op == "release":
            state, ok = semaphores.release(state, now, holder)
            assert ok == (before is not None and holder in before.holders)
        else:
            state, ok = semaphores.extend(state, now, holder, lease)
            assert ok == (before is not None and holder in before.holders)
        view = semaphores.view(state, now)
        if view is not None:
            assert len(view.holders) <= limit
            assert view.limit == limit
        if ok and op != "release":
            assert view is not None and view.holders[holder] == now + lease


windows_st = st.lists(
    st.builds(
        RateWindow,
        name=st.sampled_from(["x", "y", "z"]),
        seconds=st.sampled_from([1.0, 2.5, 10.0]),
        limit=st.integers(min_value=0, max_value=3),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda w: (w.name, w.seconds),
)


@given(windows_st, st.lists(st.floats(min_value=0.0, max_value=3.0), max_size=60))
def test_rate_limit_admits_at_most_limit_per_bucket(
    windows: list[RateWindow], steps: list[float]
) -> None:
    state: rate_limits.RateCounters | None = None
    now = 0.0
    admitted: Counter[tuple[int, int]] = Counter()
    for step in steps:
        now += step
        counts_before = [rate_limits.count(state, now, w) for w in windows]
        state, decision = rate_limits.hit(state, now, windows)
        counts_after = [rate_limits.count(state, now, w) for w in windows]
        if decision.allowed:
            assert all(c < w.limit for c, w in zip(counts_before, windows, strict=True))
            assert counts_after == [c + 1 for c in counts_before]
            for i, w in enumerate(windows):
                admitted[(i, bucket_of(w, now))] += 1
        else:
            index = decision.window_index
            assert index is not None
            assert counts_before[index] >= windows[index].limit
            assert all(
                c < w.limit for c, w in zip(counts_before[:index], windows[:index], strict=True)
            )
            assert counts_after == counts_before  # all or none
            assert 0 < decision.retry_after <= max(windows[index].seconds, 0.1)
    for (i, _bucket), n in admitted.items():
        assert n <= windows[i].limit


ordered_ops = st.lists(
    st.tuples(
        st.sampled_from(["assign", "can_proceed", "advance", "heartbeat", "skip"]),
        st.integers(min_value=0, max_value=7),
        st.booleans(),
        st.floats(min_value=0.0, max_value=40.0),
    ),
    max_size=80,
)


@given(ordered_ops)
def test_ordered_lock_cursor_is_monotonic_within_an_epoch(
    ops: list[tuple[str, int, bool, float]],
) -> None:
    state: ordered_locks.OrderedLockRecord | None = None
    now = 0.0
    tickets: list[OrderedTicket] = []
    pp = 30.0
    for op, pick, failed, step in ops:
        now += step
        before = ordered_locks.peek(state, now)
        ticket = tickets[pick % len(tickets)] if tickets else OrderedTicket(1, 1)
        if op == "assign":
            state, new = ordered_locks.assign(state, now, 10_000.0)
            tickets.append(new)
            assert new.nonce == before.next_nonce + 1
            if new.nonce == 1:
                assert all(new.epoch > t.epoch for t in tickets[:-1])
            else:
                assert new.epoch == before.epoch
        elif op == "can_proceed":
            state, gate = ordered_locks.can_proceed(state, now, ticket, pp)
            if gate.state in ("go", "poison_advance"):
                assert ticket.nonce <= gate.last_completed + 1
            if gate.state == "wait":
                assert ticket.nonce > gate.last_completed + 1
                assert gate.retry_after >= 1
        elif op == "advance":
            state, _ = ordered_locks.advance(state, now, ticket, failed, 10_000.0)
        elif op == "heartbeat":
            state, _ = ordered_locks.heartbeat(state, now, ticket)
        else:
            state, _ = ordered_locks.skip(state, now, pick)
        after = ordered_locks.peek(state, now)
        drained = after.next_nonce == 0 and after.last_completed == 0
        if after.epoch == before.epoch and not drained:
            assert after.last_completed >= before.last_completed
        assert after.epoch >= before.epoch
        assert all(n > after.last_completed for n in after.in_flight)
        if after.first_failed:
            assert after.next_nonce > 0
