"""Tests of the shared compare-and-set loop (reactor/generic/_cas.py)."""

from __future__ import annotations

import pytest

from reactor.errors import StorageError
from reactor.generic._cas import MAX_ATTEMPTS, apply, read_state
from reactor.generic.locks import LOCK_CODEC
from reactor.model.coordination import locks
from reactor.model.coordination.fencing import FENCE_RETENTION, clock_micros

from .conftest import START, FakeDocumentStore


def test_no_write_when_the_state_does_not_change(fake: FakeDocumentStore) -> None:
    apply(fake, "c", "k", LOCK_CODEC, lambda s, now: locks.acquire(s, now, "a", 10))
    assert fake.writes == 1
    refused = apply(fake, "c", "k", LOCK_CODEC, lambda s, now: locks.acquire(s, now, "b", 10))
    assert refused == 0
    assert fake.writes == 1


def test_write_uses_the_state_expiry_and_none_deletes(fake: FakeDocumentStore) -> None:
    token = apply(fake, "c", "k", LOCK_CODEC, lambda s, now: locks.acquire(s, now, "a", 10))
    assert token == clock_micros(START)
    raw = fake.raw("c", "k")
    assert raw is not None and raw.expires_at == START + 10 + FENCE_RETENTION
    assert raw.value == {"owner": "a", "count": 1, "expires_at": START + 10, "token": token}
    apply(fake, "c", "k", LOCK_CODEC, lambda s, now: locks.release(s, now, "a"))
    raw = fake.raw("c", "k")  # a tombstone keeps the token for the retention
    assert raw is not None and raw.expires_at == START + FENCE_RETENTION
    assert raw.value == {"owner": None, "count": 0, "expires_at": START, "token": token}
    apply(fake, "c", "k", LOCK_CODEC, lambda s, now: (None, None))
    assert fake.raw("c", "k") is None


def test_lost_cas_is_retried(fake: FakeDocumentStore) -> None:
    slept: list[float] = []
    fake.lose_next_writes = 3
    ok = apply(
        fake,
        "c",
        "k",
        LOCK_CODEC,
        lambda s, now: locks.acquire(s, now, "a", 10),
        sleep=slept.append,
    )
    assert ok == clock_micros(START)
    assert len(slept) == 3
    assert all(0 <= delay <= 0.01 for delay in slept)


def test_gives_up_with_storage_error_after_max_attempts(fake: FakeDocumentStore) -> None:
    fake.lose_next_writes = MAX_ATTEMPTS
    with pytest.raises(StorageError, match="compare-and-set"):
        apply(
            fake,
            "c",
            "k",
            LOCK_CODEC,
            lambda s, now: locks.acquire(s, now, "a", 10),
            sleep=lambda _: None,
        )
    assert fake.raw("c", "k") is None


def test_expired_document_is_taken_over_by_version(fake: FakeDocumentStore) -> None:
    apply(fake, "c", "k", LOCK_CODEC, lambda s, now: locks.acquire(s, now, "a", 1))
    fake.advance(1 + FENCE_RETENTION)  # past the lock and its retained token
    assert fake.raw("c", "k") is not None  # physically still there
    assert apply(fake, "c", "k", LOCK_CODEC, lambda s, now: locks.acquire(s, now, "b", 5))
    raw = fake.raw("c", "k")
    assert raw is not None and raw.value["owner"] == "b"


def test_malformed_document_raises_storage_error(fake: FakeDocumentStore) -> None:
    fake.write("c", "k", {"nonsense": 1}, expected_version=None, expires_at=None)
    with pytest.raises(StorageError, match="malformed lock"):
        read_state(fake, "c", "k", LOCK_CODEC, locks.held)
    with pytest.raises(StorageError, match="malformed lock"):
        apply(fake, "c", "k", LOCK_CODEC, lambda s, now: locks.acquire(s, now, "a", 10))


def test_read_state_never_writes(fake: FakeDocumentStore) -> None:
    apply(fake, "c", "k", LOCK_CODEC, lambda s, now: locks.acquire(s, now, "a", 10))
    assert read_state(fake, "c", "k", LOCK_CODEC, locks.held) is True
    assert fake.writes == 1


def test_state_collection_binds_store_collection_and_codec(fake: FakeDocumentStore) -> None:
    from reactor.generic._cas import StateCollection
    from reactor.generic.locks import LOCKS

    states = StateCollection(fake, LOCKS, LOCK_CODEC)
    assert states.apply("k", lambda s, now: locks.acquire(s, now, "a", 10)) >= 1
    assert states.apply("k", lambda s, now: locks.acquire(s, now, "b", 10)) == 0
    info = states.read("k", locks.info)
    assert info is not None and info.owner == "a"
    assert fake.raw(LOCKS, "k") is not None


@pytest.mark.parametrize("max_attempts", [1, 3, 300])
def test_every_lost_attempt_but_the_last_is_followed_by_a_pause(
    fake: FakeDocumentStore, max_attempts: int
) -> None:
    """The loop pauses between two attempts, never after the last one: it raises at once
    (300 attempts: above 256, where ints stop being shared objects)."""
    slept: list[float] = []
    fake.lose_next_writes = max_attempts
    with pytest.raises(StorageError, match=f"lost the compare-and-set {max_attempts} times"):
        apply(
            fake,
            "c",
            "k",
            LOCK_CODEC,
            lambda s, now: locks.acquire(s, now, "a", 10),
            max_attempts=max_attempts,
            sleep=slept.append,
        )
    assert len(slept) == max_attempts - 1 and fake.lose_next_writes == 0


def test_the_backoff_doubles_from_a_tenth_of_a_millisecond_up_to_ten_milliseconds(
    fake: FakeDocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pause after the n-th lost compare-and-set (from 0) is drawn from
    [0, min(0.01, 0.0001 * 2**n)] seconds: with the draw pinned to its upper end, the pauses
    are that bound."""
    monkeypatch.setattr("reactor.generic._cas._RANDOM.uniform", lambda a, b: b)
    slept: list[float] = []
    fake.lose_next_writes = 12
    apply(
        fake,
        "c",
        "k",
        LOCK_CODEC,
        lambda s, now: locks.acquire(s, now, "a", 10),
        sleep=slept.append,
    )
    expected = [0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064] + [0.01] * 5
    assert slept == pytest.approx(expected)


def test_a_new_state_equal_to_the_stored_one_is_not_written(fake: FakeDocumentStore) -> None:
    """A state that did not change is not written back, even as another object equal to it:
    no write, and so no new version."""
    from reactor.generic._cas import StateCodec

    codec: StateCodec[dict[str, int]] = StateCodec(
        kind="doc", encode=dict, decode=dict, expiry=lambda state: None
    )
    assert apply(fake, "c", "k", codec, lambda s, now: ({"n": 1}, "created")) == "created"
    before = fake.raw("c", "k")
    assert apply(fake, "c", "k", codec, lambda s, now: (dict(s or {}), "same")) == "same"
    assert fake.writes == 1 and fake.raw("c", "k") == before


def test_a_codec_and_a_state_collection_are_frozen_values(fake: FakeDocumentStore) -> None:
    """A StateCodec (the stores share module-level ones) and a StateCollection refuse any
    assignment and hash as values."""
    import dataclasses

    from reactor.generic._cas import StateCodec, StateCollection

    codec: StateCodec[dict[str, int]] = StateCodec(
        kind="doc", encode=dict, decode=dict, expiry=lambda state: None
    )
    states = StateCollection(fake, "c", codec)
    for value, field in ((codec, "kind"), (states, "collection")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, "other")
        assert hash(value) == hash(value)
    assert codec.kind == "doc" and states.collection == "c"
