"""``MemoryQueue``: the in-process queue primitive (docs/protocol.md, "Building a router").

Each test states one clause of :class:`reactor.ports.queues.QueuePrimitive`: the primitive
reads no clock (``now`` and ``visible_at`` are the caller's), receipts are conditional, and the
dead-letter list keeps arrival order.
"""

from __future__ import annotations

import threading

import pytest

from reactor.errors import RouterError
from reactor.memory import MemoryQueue
from reactor.memory.queue import DeadLetterList
from reactor.ports.queues import ClaimedMessage, QueuePrimitive, WaitsForMessages


@pytest.fixture
def queue() -> MemoryQueue:
    return MemoryQueue()


def _claim_one(queue: MemoryQueue, now: float = 0.0, lease: float = 30.0) -> ClaimedMessage:
    (claimed,) = queue.claim(1, now, now + lease)
    return claimed


def test_it_is_a_queue_primitive_that_can_wait(queue: MemoryQueue) -> None:
    assert isinstance(queue, QueuePrimitive) and isinstance(queue, WaitsForMessages)


def test_put_is_insert_if_absent(queue: MemoryQueue) -> None:
    assert queue.put("m1", "first", 0.0) is True
    assert queue.put("m1", "second", 0.0) is False
    assert _claim_one(queue).body == "first" and queue.size() == 1


def test_claim_hands_out_visible_messages_earliest_first_then_in_put_order(
    queue: MemoryQueue,
) -> None:
    queue.put("late", "late", 5.0)
    queue.put("a", "a", 1.0)
    queue.put("b", "b", 1.0)
    queue.put("future", "future", 100.0)
    assert queue.claim(10, 0.5, 30.0) == []
    claimed = queue.claim(10, 5.0, 35.0)
    assert [c.message_id for c in claimed] == ["a", "b", "late"]
    assert all(c.receive_count == 1 for c in claimed)
    assert len({c.receipt for c in claimed}) == 3
    assert queue.claim(10, 34.9, 64.9) == []  # leased until 35


def test_claim_respects_the_limit(queue: MemoryQueue) -> None:
    for n in range(3):
        queue.put(f"m{n}", str(n), 0.0)
    assert [c.message_id for c in queue.claim(2, 0.0, 30.0)] == ["m0", "m1"]
    assert [c.message_id for c in queue.claim(2, 0.0, 30.0)] == ["m2"]


def test_a_lapsed_lease_is_claimed_again_with_a_new_receipt(queue: MemoryQueue) -> None:
    queue.put("m", "body", 0.0)
    first = _claim_one(queue, now=0.0, lease=30.0)
    second = _claim_one(queue, now=30.0, lease=30.0)
    assert second.receive_count == 2 and second.receipt != first.receipt
    assert queue.delete("m", first.receipt) is False  # stale
    assert queue.change_visibility("m", first.receipt, 999.0) is False
    assert queue.release("m", first.receipt, 0.0) is False
    assert queue.dead_letter("m", first.receipt, "late", 1.0) is False
    assert queue.claim(1, 59.9, 90.0) == []  # the stale calls changed nothing
    assert queue.delete("m", second.receipt) is True and queue.size() == 0


def test_change_visibility_keeps_the_receipt(queue: MemoryQueue) -> None:
    queue.put("m", "body", 0.0)
    claimed = _claim_one(queue)
    assert queue.change_visibility("m", claimed.receipt, 100.0) is True
    assert queue.claim(1, 99.0, 129.0) == []
    assert queue.delete("m", claimed.receipt) is True


def test_release_revokes_the_receipt_and_keeps_the_count(queue: MemoryQueue) -> None:
    queue.put("m", "body", 0.0)
    claimed = _claim_one(queue)
    assert queue.release("m", claimed.receipt, 10.0) is True
    assert queue.delete("m", claimed.receipt) is False  # no receipt until the next claim
    assert queue.release("m", claimed.receipt, 0.0) is False
    assert queue.claim(1, 9.9, 40.0) == []
    again = _claim_one(queue, now=10.0)
    assert again.receive_count == 2 and again.body == "body"


def test_dead_letter_moves_the_body_raw_in_one_step(queue: MemoryQueue) -> None:
    queue.put("text", "plain", 0.0)
    queue.put("bytes", b"\xff\xfe", 0.0)
    for claimed in queue.claim(2, 0.0, 30.0):
        assert queue.dead_letter(claimed.message_id, claimed.receipt, "why", 7.0) is True
    assert queue.size() == 0
    text, raw = queue.dead_letters(None, 10)
    assert (text.id, text.body, text.reason, text.at, text.body_encoding) == (
        "1", "plain", "why", 7.0, "text",
    )
    assert raw.id == "2" and raw.body_encoding == "base64" and raw.raw_body() == b"\xff\xfe"


def test_dead_letters_page_after_an_id_even_a_removed_one(queue: MemoryQueue) -> None:
    for n in range(4):
        queue.put(f"m{n}", f"b{n}", 0.0)
    for claimed in queue.claim(4, 0.0, 30.0):
        queue.dead_letter(claimed.message_id, claimed.receipt, "r", 1.0)
    assert [d.id for d in queue.dead_letters(None, 2)] == ["1", "2"]
    assert queue.remove_dead_letter("2") is True
    assert queue.remove_dead_letter("2") is False  # exactly one remover wins
    assert [d.id for d in queue.dead_letters("2", 10)] == ["3", "4"]
    assert queue.get_dead_letter("3") is not None and queue.get_dead_letter("2") is None
    assert queue.get_dead_letter("nope") is None
    with pytest.raises(ValueError):
        queue.dead_letters("not-an-id", 10)


def test_a_closed_queue_refuses_puts(queue: MemoryQueue) -> None:
    queue.put("m", "body", 0.0)
    queue.close()
    queue.close()
    with pytest.raises(RouterError):
        queue.put("n", "body", 0.0)
    assert _claim_one(queue).message_id == "m"  # what is stored stays readable


def test_wait_for_messages_returns_when_a_message_is_put(queue: MemoryQueue) -> None:
    waiting = threading.Event()
    returned = threading.Event()

    def wait() -> None:
        waiting.set()
        queue.wait_for_messages(30)
        returned.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert waiting.wait(10)
    for n in range(200):  # a put just before the wait began is missed: put again
        queue.put(f"m{n}", "body", 0.0)
        if returned.wait(0.05):
            break
    waiter.join(10)
    assert returned.is_set() and queue.size() < 200  # woken by a put, not by the timeout


def test_only_the_current_receipt_is_honoured_whatever_its_value(queue: MemoryQueue) -> None:
    """Receipts are compared for equality: an older one (``"9"`` after ``"10"``: smaller as a
    number, greater as text) or another message's is refused by every conditional call."""
    queue.put("m", "body", 0.0)
    stale = [_claim_one(queue, now=float(t), lease=0.5).receipt for t in range(9)]
    current = _claim_one(queue, now=9.0, lease=30.0).receipt
    queue.put("other", "body", 0.0)
    foreign = _claim_one(queue, now=10.0).receipt
    assert int(current) > int(stale[-1]) and current < stale[-1]  # "10" < "9" as text
    for receipt in (*stale, foreign):
        assert queue.delete("m", receipt) is False
        assert queue.change_visibility("m", receipt, 99.0) is False
        assert queue.release("m", receipt, 0.0) is False
        assert queue.dead_letter("m", receipt, "no", 0.0) is False
    assert queue.delete("m", current) is True


def test_a_dead_letter_page_above_the_small_int_cache_stops_at_its_limit() -> None:
    """A page of 257 letters (above 256, where ints stop being shared objects) holds exactly
    ``limit`` letters, the oldest first, from the start and after a cursor."""
    letters = DeadLetterList()
    for n in range(300):
        letters.add(f"b{n}", "r", float(n))
    first = letters.page(257, None)
    assert [d.id for d in first] == [str(n) for n in range(1, 258)]
    after = letters.page(257, "10")
    assert len(after) == 257 and (after[0].id, after[-1].id) == ("11", "267")


@pytest.mark.parametrize("cursor", ["\u0661", "abc"])
def test_a_cursor_that_is_not_an_arrival_number_is_refused(
    queue: MemoryQueue, cursor: str
) -> None:
    """A dead-letter id is an arrival number in ASCII digits: a cursor of other digits (the
    Arabic-Indic one, which ``int`` reads as 1) or of letters names no letter and is refused
    as a bad cursor."""
    for n in range(2):
        queue.put(f"m{n}", f"b{n}", 0.0)
    for claimed in queue.claim(2, 0.0, 30.0):
        queue.dead_letter(claimed.message_id, claimed.receipt, "r", 1.0)
    with pytest.raises(ValueError, match="bad dead-letter cursor"):
        queue.dead_letters(cursor, 10)
    assert [d.id for d in queue.dead_letters("1", 10)] == ["2"]


def test_a_message_put_again_under_a_deleted_ones_id_is_not_claimed_early(
    queue: MemoryQueue,
) -> None:
    """A due entry left by a deleted message must never pass for the new message's current
    one (a requeued dead letter put again under its fixed id after the first copy was acked):
    the new message stays leased until its own lease ends. Before versions came from the
    queue's sequence, both messages counted their versions from 0 and the stale entry due at
    20 handed the new message out at 20, its lease running to 40."""
    assert queue.put("m", "first", 0.0)
    [first] = queue.claim(1, 0.0, 10.0)
    assert queue.change_visibility("m", first.receipt, 20.0)
    assert queue.delete("m", first.receipt)
    assert queue.put("m", "second", 0.0)
    [second] = queue.claim(1, 0.0, 30.0)
    assert queue.change_visibility("m", second.receipt, 40.0)
    assert queue.claim(1, 20.0, 50.0) == []
    assert queue.claim(1, 39.0, 50.0) == []
    [again] = queue.claim(1, 40.0, 50.0)
    assert again.body == "second" and again.receive_count == 2


def test_counts_tell_ready_delayed_in_flight_and_dead_messages_apart(queue: MemoryQueue) -> None:
    """``counts(now)``: visible (never claimed, released and due, or a lapsed lease) is ready,
    a future message without a receipt is delayed, a running lease is in flight."""
    for name, due in [("a", 0.0), ("b", 0.0), ("c", 0.0), ("later", 100.0)]:
        assert queue.put(name, name, due)
    claimed = {m.message_id: m for m in queue.claim(3, 0.0, 10.0)}
    assert queue.release("b", claimed["b"].receipt, 5.0)
    assert queue.dead_letter("c", claimed["c"].receipt, "poison", 1.0)
    stats = queue.counts(1.0)
    assert (stats.ready, stats.delayed, stats.in_flight, stats.dead_letters) == (0, 2, 1, 1)
    assert stats.consumers is None
    stats = queue.counts(10.0)  # b is due again, a's lease lapsed
    assert (stats.ready, stats.delayed, stats.in_flight) == (2, 1, 0)
