"""Completion signals on Redis (docs/protocol.md#signals; adapters/reactor_redis/signals.py).

On a single server every subscription of a storage shares one pub/sub connection, read by one
listener thread: a wait never opens a TCP connection of its own (docs/workers.md,
"Background runs"). On the cluster each subscription keeps its own pub/sub. Either way a
subscription gets exactly the messages of its channel, published after it was confirmed.
"""

from __future__ import annotations

import os
import queue
import threading
import types
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.connection import AbstractConnection

pytestmark = pytest.mark.redis

import reactor_redis  # noqa: E402  (installed by scripts/test: fail, never skip)
from reactor_redis import signals  # noqa: E402
from reactor_redis.keys import Keys  # noqa: E402


@pytest.fixture(params=["redis", "redis_cluster"])
def storage(request: pytest.FixtureRequest, service_url: Callable[[str], str]) -> Iterator[Any]:
    url = service_url(request.param)
    joined = f"{url}{'&' if '?' in url else '?'}prefix=sig{uuid.uuid4().hex[:10]}"
    built = reactor_redis.storage_from_url(joined)
    try:
        yield built
    finally:
        built.close()


class _Connects:
    """Counts TCP connections opened by any redis-py connection."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = AbstractConnection.connect_check_health

        def connect(conn: AbstractConnection, *args: Any, **kwargs: Any) -> None:
            if conn._sock is None:  # an open connection's connect is a no-op
                self.count += 1
            original(conn, *args, **kwargs)

        monkeypatch.setattr(AbstractConnection, "connect_check_health", connect)


def test_every_subscription_gets_the_messages_of_its_channel_only(storage: Any) -> None:
    signals = storage.signals
    a1, a2, b = signals.subscribe("a"), signals.subscribe("a"), signals.subscribe("b")
    try:
        signals.publish("a", "done-a")
        signals.publish("b", "done-b")
        assert a1.get(5) == "done-a" and a2.get(5) == "done-a"
        assert b.get(5) == "done-b"
        assert a1.get(0.05) is None and b.get(0.05) is None  # nothing else came
        a1.close()  # the other subscriber of "a" keeps listening
        signals.publish("a", "again")
        assert a2.get(5) == "again"
    finally:
        for subscription in (a1, a2, b):
            subscription.close()
    assert a1.get(0) is None  # a closed subscription only times out


def test_waits_on_a_single_server_share_one_connection(
    service_url: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = reactor_redis.storage_from_url(
        f"{service_url('redis')}?prefix=sig{uuid.uuid4().hex[:10]}"
    )
    try:
        storage.signals.publish("warm", "x")  # the command connection
        connects = _Connects(monkeypatch)
        subscriptions = [storage.signals.subscribe(f"run:{i}") for i in range(20)]
        assert connects.count <= 1  # the shared pub/sub connection (maybe an idle pooled one)
        for subscription in subscriptions[::2]:
            subscription.close()
        more = [storage.signals.subscribe(f"more:{i}") for i in range(5)]
        assert connects.count <= 1
        for i, subscription in enumerate(subscriptions[1::2]):
            storage.signals.publish(f"run:{2 * i + 1}", f"m{i}")
            assert subscription.get(5) == f"m{i}"
        for subscription in subscriptions + more:
            subscription.close()
    finally:
        storage.close()


def test_concurrent_subscribers_of_one_channel_are_all_confirmed(storage: Any) -> None:
    """Threads subscribing to the same channel at once: each returns only once the server
    confirmed the channel, so a message published after every subscribe returned reaches
    all of them."""
    barrier = threading.Barrier(8)
    subscriptions: list[Any] = []
    guard = threading.Lock()

    def subscribe() -> None:
        barrier.wait(10)
        subscription = storage.signals.subscribe("shared")
        with guard:
            subscriptions.append(subscription)

    threads = [threading.Thread(target=subscribe) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(subscriptions) == 8
    storage.signals.publish("shared", "all")
    assert [s.get(5) for s in subscriptions] == ["all"] * 8
    for subscription in subscriptions:
        subscription.close()


def test_a_forked_child_listens_on_its_own_connection(storage: Any) -> None:
    """A listener thread does not survive a fork: the child makes its own."""
    parent = storage.signals.subscribe("before-fork")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: subscribe, report what it heard, exit without cleanup
        try:
            child = storage.signals.subscribe("in-child")
            os.write(write, b"ready")
            got = child.get(10)
            os.write(write, b"|" + (got or "none").encode())
        finally:
            os._exit(0)
    try:
        assert os.read(read, 5) == b"ready"
        storage.signals.publish("in-child", "hello child")
        heard = os.read(read, 64)
        assert heard == b"|hello child"
        storage.signals.publish("before-fork", "hello parent")
        assert parent.get(5) == "hello parent"
    finally:
        os.waitpid(pid, 0)
        os.close(read)
        os.close(write)
        parent.close()


# ------------------------------------------------- fakes: deadlines on an injected clock


class _Clock:
    """Monotonic seconds that only move when a read is made."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


class _ScriptedPubSub:
    """An own pub/sub (the cluster's kind) whose every read takes ``step`` seconds of the
    clock and returns the next scripted reply (``None`` once they run out)."""

    def __init__(
        self, clock: _Clock, replies: list[dict[str, Any] | None], step: float = 0.5
    ) -> None:
        self.clock = clock
        self.replies = replies
        self.step = step
        self.reads = 0

    def subscribe(self, name: str) -> None:
        pass

    def get_message(self, ignore_subscribe_messages: bool = False, timeout: float = 0.0) -> Any:
        self.reads += 1
        if self.reads > 50:
            raise AssertionError("read on well past the deadline")
        self.clock.now += self.step
        return self.replies.pop(0) if self.replies else None

    def unsubscribe(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    """The signals module's clock, injected."""
    found = _Clock()
    monkeypatch.setattr(signals, "time", types.SimpleNamespace(monotonic=found.monotonic))
    return found


@pytest.mark.parametrize(("step", "reads"), [(0.5, 10), (0.75, 7)])
def test_an_own_subscribe_never_confirmed_reads_until_its_deadline(
    clock: _Clock, step: float, reads: int
) -> None:
    """The confirmation is awaited for CONFIRM_TIMEOUT (5 s), then the subscription is
    returned anyway: reads at 0, 0.5, ... 4.5 s, none at 5 s (or at 0, 0.75, ... 4.5 s, none
    at 5.25 s: the wait ends once the deadline has passed, not only when met exactly)."""
    pubsub = _ScriptedPubSub(clock, [], step)
    store = signals.RedisSignalStore(types.SimpleNamespace(pubsub=lambda: pubsub), Keys("p"))
    subscription = store._own_subscription("chan")
    assert pubsub.reads == reads and clock.now == 100.0 + reads * step
    assert isinstance(subscription, signals.RedisSubscription)


def test_an_own_subscription_waits_past_an_empty_read_until_its_deadline(clock: _Clock) -> None:
    message = {"type": "message", "data": b"hi"}
    assert signals.RedisSubscription(_ScriptedPubSub(clock, [None, message])).get(5.0) == "hi"
    pubsub = _ScriptedPubSub(clock, [])
    assert signals.RedisSubscription(pubsub).get(2.0) is None
    assert pubsub.reads == 5  # with 2, 1.5, 1, 0.5 and 0 s left


class _QueuedPubSub:
    """A shared listener's pub/sub fed through a queue; an exception queued is raised by the
    read that meets it. Records the timeout of every read."""

    def __init__(self) -> None:
        self.items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.timeouts: list[float] = []

    def subscribe(self, channel: str) -> None:
        self.items.put({"type": "subscribe", "channel": channel})

    def get_message(self, timeout: float = 0.0) -> Any:
        self.timeouts.append(timeout)
        try:
            item = self.items.get(timeout=min(timeout, 0.05))
        except queue.Empty:
            return None
        if isinstance(item, Exception):
            raise item
        return item

    def unsubscribe(self, channel: str) -> None:
        pass

    def close(self) -> None:
        pass


def test_the_listener_reads_on_after_a_read_error() -> None:
    """A dropped connection is logged and read again (redis-py reconnects), not the end of
    the thread: a message that follows still reaches the subscription."""
    pubsub = _QueuedPubSub()
    listener = signals._Listener(types.SimpleNamespace(pubsub=lambda: pubsub))
    try:
        subscription = listener.add("chan")
        pubsub.items.put(redis.ConnectionError("dropped"))
        pubsub.items.put({"type": "message", "channel": "chan", "data": b"after"})
        assert subscription.get(5.0) == "after"
    finally:
        listener.close()


def test_the_listener_blocks_in_its_reads() -> None:
    """Each read of the listener thread waits for a message (it never spins)."""
    pubsub = _QueuedPubSub()
    listener = signals._Listener(types.SimpleNamespace(pubsub=lambda: pubsub))
    try:
        listener.add("chan")
    finally:
        listener.close()
    assert pubsub.timeouts and min(pubsub.timeouts) > 0


def test_a_shared_subscription_reads_a_negative_timeout_as_no_wait() -> None:
    """A negative timeout waits no time: the queued message, else ``None`` at once."""
    pubsub = _QueuedPubSub()
    listener = signals._Listener(types.SimpleNamespace(pubsub=lambda: pubsub))
    try:
        subscription = listener.add("chan")
        assert subscription.get(-0.5) is None
        subscription.deliver("ready")
        assert subscription.get(-0.5) == "ready"
    finally:
        listener.close()


class _ClosingPubSub(_QueuedPubSub):
    """A :class:`_QueuedPubSub` that records, when closed, whether the listener's thread was
    still alive."""

    def __init__(self) -> None:
        super().__init__()
        self.thread_alive_at_close: list[bool] = []
        self.listener: Any = None

    def close(self) -> None:
        thread = self.listener._thread
        self.thread_alive_at_close.append(thread is not None and thread.is_alive())


def test_closing_the_listener_stops_its_thread_before_closing_the_connection() -> None:
    """``close`` waits for the listener thread to leave its read: the connection is never
    closed under a read in progress, and no thread is left behind."""
    pubsub = _ClosingPubSub()
    listener = signals._Listener(types.SimpleNamespace(pubsub=lambda: pubsub))
    pubsub.listener = listener
    listener.add("chan")
    listener.close()
    assert pubsub.thread_alive_at_close == [False]
