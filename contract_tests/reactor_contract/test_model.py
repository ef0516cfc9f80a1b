"""Model-based tests: random operation sequences, adapter vs the pure model
(docs/contract-suite.md).

Each example draws a sequence of coordination operations and applies every one to the adapter
and to :class:`reactor.model.coordination.reference.ReferenceCoordination`, comparing results
call by call. The reference clock follows the adapter: before each operation it is set to
``storage.now()`` read just before the adapter's call. TTLs are hours, so no result depends on
the few microseconds between the two clock reads; expiry is forced on both sides at once
(:meth:`Probe.expire` on the adapter, :func:`reactor_contract.model_expiry.shift_expiry` on the
reference). Times inside results (lease expiries, retry-after) are compared within a second.

Fencing values (lock tokens, ordered-lock epochs; docs/coordination.md#fencing-tokens) come
from each side's own clock, so they are compared by order, not by value (:class:`Fences`):
whenever the reference issues a new value the adapter must issue a new one too, each strictly
greater than every earlier value of its side for that key, and a value seen again must be the
partner of the same reference value. Ordered-lock tickets are kept as (reference, adapter)
pairs and each side is called with its own. The ``collect`` operation garbage-collects a lock's
or ordered lock's whole record, retained fence included (``probe.expire(..., FENCE)``; the
reference drops its state), after which both sides fall back to their clocks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactor.model.coordination import locks as lock_model
from reactor.model.coordination import ordered_locks as ordered_model
from reactor.model.coordination import periods as period_model
from reactor.model.coordination import rate_limits as rate_model
from reactor.model.coordination import semaphores as semaphore_model
from reactor.model.coordination.reference import ReferenceCoordination
from reactor.model.records import OrderedTicket, RateWindow
from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, uid
from reactor_contract.model_expiry import shift_expiry
from reactor_contract.probe import FENCE, Probe

__all__ = ["Fences", "ModelContract", "same"]

#: Seconds two times in comparable results may differ by (clock reads of the two sides).
TIME_TOLERANCE = 1.0

MODEL_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

Op = tuple[Any, ...]

KEYS = st.integers(min_value=0, max_value=1)
OWNERS = st.sampled_from(["a", "b", "c"])
TTLS = st.sampled_from([HOUR, 2 * HOUR, None])
LEASES = st.sampled_from([HOUR, 2 * HOUR])
WINDOWS = (
    RateWindow("a", 1e9, 2),
    RateWindow("b", 2e9, 3),
    RateWindow("c", 1e9, 1),
)

LOCK_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("acquire"), KEYS, OWNERS, TTLS),
        st.tuples(st.just("release"), KEYS, OWNERS),
        st.tuples(st.just("extend"), KEYS, OWNERS, TTLS),
        st.tuples(st.just("held"), KEYS),
        st.tuples(st.just("info"), KEYS),
        st.tuples(st.just("expire"), KEYS),
        st.tuples(st.just("collect"), KEYS),
    ),
    max_size=30,
)
SEMAPHORE_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("acquire"), KEYS, OWNERS, st.integers(0, 3), LEASES),
        st.tuples(st.just("release"), KEYS, OWNERS),
        st.tuples(st.just("extend"), KEYS, OWNERS, LEASES),
        st.tuples(st.just("state"), KEYS),
        st.tuples(st.just("reset"), KEYS),
        st.tuples(st.just("expire"), KEYS),
        st.tuples(st.just("expire_member"), KEYS, OWNERS),
    ),
    max_size=30,
)
RATE_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("hit"),
            KEYS,
            st.lists(st.integers(0, len(WINDOWS) - 1), min_size=1, max_size=3, unique=True),
        ),
        st.tuples(st.just("count"), KEYS, st.integers(0, len(WINDOWS) - 1)),
        st.tuples(st.just("expire"), KEYS),
    ),
    max_size=30,
)
PERIOD_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("mark"), KEYS, st.sampled_from([HOUR, None]), st.sampled_from([None, "x", "y"])
        ),
        st.tuples(st.just("marker"), KEYS),
        st.tuples(st.just("expire"), KEYS),
    ),
    max_size=20,
)
TICKETS = st.integers(min_value=0, max_value=12)
ORDERED_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), KEYS),
        st.tuples(st.just("assign"), KEYS),
        st.tuples(st.just("can_proceed"), KEYS, TICKETS),
        st.tuples(st.just("advance"), KEYS, TICKETS, st.booleans()),
        st.tuples(st.just("heartbeat"), KEYS, TICKETS),
        st.tuples(st.just("skip"), KEYS, st.integers(1, 6)),
        st.tuples(st.just("reset"), KEYS),
        st.tuples(st.just("peek"), KEYS),
        st.tuples(st.just("expire"), KEYS),
        st.tuples(st.just("expire_member"), KEYS, TICKETS),
        st.tuples(st.just("collect"), KEYS),
    ),
    max_size=40,
)


def same(a: Any, b: Any, *, tolerance: float = TIME_TOLERANCE) -> bool:
    """Structural equality where numbers may differ by ``tolerance`` (times on two clocks)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        if math.isinf(a) or math.isinf(b):
            return a == b
        return abs(a - b) <= tolerance
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and all(
            same(getattr(a, f.name), getattr(b, f.name), tolerance=tolerance)
            for f in dataclasses.fields(a)
        )
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(same(a[k], b[k], tolerance=tolerance) for k in a)
    if isinstance(a, list | tuple | range) and isinstance(b, list | tuple | range):
        if len(a) != len(b):
            return False
        return all(same(x, y, tolerance=tolerance) for x, y in zip(a, b, strict=True))
    return bool(a == b)


class Fences:
    """Pairs the reference's fencing values with the adapter's, per key (see the module notes).

    Both sides mint values from their own clocks (docs/coordination.md#fencing-tokens), so only
    their order can be compared: :meth:`translate` maps an adapter value to the reference value
    it stands for, or to a value that cannot match when the two sides disagree.
    """

    def __init__(self) -> None:
        self.pairs: dict[str, dict[int, int]] = {}

    def translate(self, key: str, expected: int, got: int) -> int:
        """The reference value that the adapter's ``got`` stands for, beside ``expected``.

        Args:
            key: the lock or ordered-lock key.
            expected: the reference's value (0 = none: refused, or no epoch).
            got: the adapter's value.

        Returns:
            ``expected`` when ``got`` is its partner: the value already paired with it, or, for
            a reference value not seen before, a new adapter value greater than every earlier
            one of the key (which then becomes its partner). Otherwise ``-1 - got``, which no
            fencing value equals. 0 stays 0.
        """
        if expected == 0 or got == 0:
            return got
        seen = self.pairs.setdefault(key, {})
        if expected in seen:
            return expected if seen[expected] == got else -1 - got
        if all(expected > r for r in seen) and all(got > a for a in seen.values()):
            seen[expected] = got
            return expected
        return -1 - got


class _Run:
    """One example: an adapter, the reference, fresh keys, and the history for messages."""

    def __init__(self, storage: Storage, probe: Probe) -> None:
        self.storage = storage
        self.probe = probe
        self.ref = ReferenceCoordination()
        self.namespace = uid("model")
        self.history: list[str] = []
        self.fences = Fences()
        #: Ordered-lock tickets issued per key, as (reference ticket, adapter ticket) pairs.
        self.tickets: dict[str, list[tuple[OrderedTicket, OrderedTicket]]] = {}

    def key(self, index: int) -> str:
        return f"{self.namespace}-{index}"

    def sync(self) -> float:
        now = self.storage.now()
        self.ref.set_now(now)
        return now

    def check(self, op: Op, got: Any, expected: Any) -> None:
        self.history.append(f"{op!r} -> adapter {got!r}, model {expected!r}")
        assert same(got, expected), "adapter diverged from the model:\n" + "\n".join(
            self.history[-12:]
        )

    def call(self, op: Op, stores: tuple[Any, Any], method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``method`` on the reference store, then on the adapter's, and compare."""
        adapter, model = stores
        self.sync()
        expected = getattr(model, method)(*args, **kwargs)
        got = getattr(adapter, method)(*args, **kwargs)
        self.check(op, got, expected)
        return expected

    def call_fenced(
        self,
        op: Op,
        stores: tuple[Any, Any],
        method: str,
        args: tuple[tuple[Any, ...], tuple[Any, ...]],
        kwargs: dict[str, Any],
        translate: Callable[[Any, Any], Any],
    ) -> tuple[Any, Any]:
        """Call ``method`` with per-side ``args`` (reference, adapter) and compare the results
        after ``translate(expected, got)`` mapped the adapter's fencing values to the
        reference's; returns ``(expected, got)``."""
        adapter, model = stores
        self.sync()
        expected = getattr(model, method)(*args[0], **kwargs)
        got = getattr(adapter, method)(*args[1], **kwargs)
        self.check(op, translate(expected, got), expected)
        return expected, got

    def collect(self, concern: str, key: str, states: dict[str, Any]) -> None:
        """Garbage-collect ``key``'s whole record on both sides, retained fence included."""
        self.sync()
        states.pop(key, None)
        self.probe.expire(concern, key, FENCE)
        self.history.append(f"collect {concern} {key}")

    def expire_both(
        self,
        concern: str,
        key: str,
        states: dict[str, Any],
        live: Callable[[Any, float], Any],
        member: str | None = None,
    ) -> None:
        """Force expiry of ``key`` (or one member) on the adapter and on the reference."""
        now = self.sync()
        current = live(states.get(key), now)
        if current is None:
            return
        states[key] = shift_expiry(concern, current, now, member)
        self.probe.expire(concern, key, member)
        self.history.append(f"expire {concern} {key} member={member}")


def _ticket(run: _Run, key: str, pick: int) -> tuple[OrderedTicket, OrderedTicket]:
    """A (reference, adapter) ticket pair issued for ``key``, or a legacy epoch-0 ticket."""
    issued = run.tickets.get(key, [])
    if not issued:
        legacy = OrderedTicket(nonce=pick % 3 + 1, epoch=0)
        return legacy, legacy
    return issued[pick % len(issued)]


class ModelContract:
    """The adapter's coordination stores agree with the pure model on random sequences."""

    reactor_concern = "model"

    @pytest.mark.obligations("O-locks-20")
    @MODEL_SETTINGS
    @given(ops=LOCK_OPS)
    def test_locks_follow_the_model(self, storage: Storage, probe: Probe, ops: list[Op]) -> None:
        run = _Run(storage, probe)
        stores = (storage.locks, run.ref.locks)

        def info(key: str) -> Callable[[Any, Any], Any]:
            def translate(expected: Any, got: Any) -> Any:
                if expected is None or got is None:
                    return got
                token = run.fences.translate(key, expected.token, got.token)
                return dataclasses.replace(got, token=token)

            return translate

        def token(key: str) -> Callable[[Any, Any], Any]:
            def translate(expected: Any, got: Any) -> Any:
                return run.fences.translate(key, expected, got)

            return translate

        for op in ops:
            name, key = op[0], run.key(op[1])
            args = (key, *op[2:])
            if name == "expire":
                run.expire_both("lock", key, run.ref.locks.states, lock_model.live)
            elif name == "collect":
                run.collect("lock", key, run.ref.locks.states)
            elif name == "acquire":
                run.call_fenced(op, stores, "acquire", (args, args), {}, token(key))
            elif name == "info":
                run.call_fenced(op, stores, "info", (args, args), {}, info(key))
            else:
                run.call(op, stores, name, *args)
        for index in (0, 1):
            key = run.key(index)
            run.call_fenced(("info", index), stores, "info", ((key,), (key,)), {}, info(key))

    @pytest.mark.obligations("O-semaphores-16")
    @MODEL_SETTINGS
    @given(ops=SEMAPHORE_OPS)
    def test_semaphores_follow_the_model(
        self, storage: Storage, probe: Probe, ops: list[Op]
    ) -> None:
        run = _Run(storage, probe)
        stores = (storage.semaphores, run.ref.semaphores)
        model = run.ref.semaphores
        for op in ops:
            name, key = op[0], run.key(op[1])
            if name == "expire":
                run.expire_both("semaphore", key, model.states, semaphore_model.live)
            elif name == "expire_member":
                holder = op[2]
                now = run.sync()
                live = semaphore_model.live(model.states.get(key), now)
                if live is not None and holder in live.holders:
                    run.expire_both(
                        "semaphore", key, model.states, semaphore_model.live, member=holder
                    )
            else:
                run.call(op, stores, name, key, *op[2:])
        for index in (0, 1):
            run.call(("state", index), stores, "state", run.key(index))

    @pytest.mark.obligations("O-rate_limits-15")
    @MODEL_SETTINGS
    @given(ops=RATE_OPS)
    def test_rate_limits_follow_the_model(
        self, storage: Storage, probe: Probe, ops: list[Op]
    ) -> None:
        run = _Run(storage, probe)
        stores = (storage.rate_limits, run.ref.rate_limits)
        for op in ops:
            name, key = op[0], run.key(op[1])
            if name == "expire":
                run.expire_both("rate_limit", key, run.ref.rate_limits.states, _rate_live)
            elif name == "hit":
                windows: Sequence[RateWindow] = [WINDOWS[i] for i in op[2]]
                run.call(op, stores, "hit", key, windows)
            else:
                run.call(op, stores, "count", key, WINDOWS[op[2]])

    @pytest.mark.obligations("O-periods-10")
    @MODEL_SETTINGS
    @given(ops=PERIOD_OPS)
    def test_periods_follow_the_model(self, storage: Storage, probe: Probe, ops: list[Op]) -> None:
        run = _Run(storage, probe)
        stores = (storage.periods, run.ref.periods)
        for op in ops:
            name, key = op[0], run.key(op[1])
            if name == "expire":
                run.expire_both("period", key, run.ref.periods.states, period_model.live)
            elif name == "mark":
                run.call(op, stores, "mark", key, ttl=op[2], context_id=op[3])
            else:
                run.call(op, stores, "marker", key)

    @pytest.mark.obligations("O-ordered_locks-26")
    @MODEL_SETTINGS
    @given(ops=ORDERED_OPS)
    def test_ordered_locks_follow_the_model(
        self, storage: Storage, probe: Probe, ops: list[Op]
    ) -> None:
        run = _Run(storage, probe)
        stores = (storage.ordered_locks, run.ref.ordered_locks)
        model = run.ref.ordered_locks
        pp = 600.0

        def epoch_of(key: str) -> Callable[[Any, Any], Any]:
            def translate(expected: Any, got: Any) -> Any:
                epoch = run.fences.translate(key, expected.epoch, got.epoch)
                return dataclasses.replace(got, epoch=epoch)

            return translate

        def same_value(expected: Any, got: Any) -> Any:
            return got

        def ticketed(op: Op, key: str, method: str, pick: int, **kwargs: Any) -> None:
            ref_ticket, adapter_ticket = _ticket(run, key, pick)
            args = ((key, ref_ticket), (key, adapter_ticket))
            run.call_fenced(op, stores, method, args, kwargs, same_value)

        for op in ops:
            name, key = op[0], run.key(op[1])
            if name == "assign":
                pair = run.call_fenced(
                    op, stores, "assign", ((key,), (key,)), {"ttl": HOUR}, epoch_of(key)
                )
                run.tickets.setdefault(key, []).append(pair)
            elif name == "can_proceed":
                ticketed(op, key, "can_proceed", op[2], poison_pill_timeout=pp)
            elif name == "advance":
                ticketed(op, key, "advance", op[2], failed=op[3], ttl=HOUR)
            elif name == "heartbeat":
                ticketed(op, key, "heartbeat", op[2])
            elif name == "peek":
                run.call_fenced(op, stores, "peek", ((key,), (key,)), {}, epoch_of(key))
            elif name in ("skip", "reset"):
                run.call(op, stores, name, key, *op[2:])
            elif name == "expire":
                run.expire_both("ordered_lock", key, model.states, ordered_model.live)
            elif name == "collect":
                run.collect("ordered_lock", key, model.states)
            else:
                nonce = _ticket(run, key, op[2])[0].nonce
                now = run.sync()
                live = ordered_model.live(model.states.get(key), now)
                if live is not None and live.timers is not None and nonce in live.timers.value:
                    run.expire_both(
                        "ordered_lock", key, model.states, ordered_model.live, member=str(nonce)
                    )
        for index in (0, 1):
            key = run.key(index)
            run.call_fenced(("peek", index), stores, "peek", ((key,), (key,)), {}, epoch_of(key))


def _rate_live(state: Any, now: float) -> Any:
    """A rate-limit state with lapsed window counters dropped (``None`` when none is left)."""
    if state is None:
        return None
    assert isinstance(state, rate_model.RateCounters)
    windows = {wid: c for wid, c in state.windows.items() if c.expires_at > now}
    return dataclasses.replace(state, windows=windows) if windows else None


class TestModel(ModelContract):
    """The model-based contract against ``--reactor-storage``."""
