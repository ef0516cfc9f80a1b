"""reactor.model.ids: random hex ids for stored names (base ids, piece keys)."""

from __future__ import annotations

import os
import random
import re

import pytest

from reactor.model.ids import random_hex


def test_random_hex_has_two_digits_per_byte_zero_padded() -> None:
    ids = [random_hex(6) for _ in range(2000)]
    assert all(re.fullmatch(r"[0-9a-f]{12}", value) for value in ids)
    assert len(set(ids)) == len(ids)
    assert any(value.startswith("0") for value in (random_hex(1) for _ in range(500)))


def test_random_hex_refuses_fewer_than_one_byte() -> None:
    with pytest.raises(ValueError, match="nbytes must be at least 1"):
        random_hex(0)


def test_a_users_random_seed_does_not_repeat_ids() -> None:
    random.seed(42)
    first = random_hex(6)
    random.seed(42)
    assert random_hex(6) != first


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_draws_another_sequence_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next id and leave without running pytest's atexit
        os.write(write, random_hex(6).encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert re.fullmatch(r"[0-9a-f]{12}", child)
    assert child != random_hex(6)
