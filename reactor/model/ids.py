"""Random ids for stored names that must not collide but need not be secret.

A checkpoint's base id and a piece's key suffix (docs/protocol.md, "Incremental
checkpoints") are written with every step. ``os.urandom`` is a system call (~9 µs on the
development machine, a tenth of a step's engine cost); these ids come from a private
Mersenne Twister instead, seeded from ``os.urandom`` when the module loads and again in every
forked child, so two processes never share a sequence. A user's ``random.seed(...)`` does not
touch it. Secrets (keys, nonces, owner tokens that guard a lease) keep using ``os.urandom``
or ``uuid4``.
"""

from __future__ import annotations

import os
import random

__all__ = ["random_hex"]

_RNG = random.Random()  # seeded from os.urandom
os.register_at_fork(after_in_child=_RNG.seed)


def random_hex(nbytes: int) -> str:
    """``nbytes`` random bytes as ``2 * nbytes`` lowercase hex digits.

    Args:
        nbytes: how many random bytes (``>= 1``).

    Returns:
        The hex string, zero-padded to ``2 * nbytes`` digits.

    Raises:
        ValueError: ``nbytes`` is less than 1.
    """
    if nbytes < 1:
        raise ValueError(f"nbytes must be at least 1, not {nbytes}")
    return f"{_RNG.getrandbits(8 * nbytes):0{2 * nbytes}x}"
