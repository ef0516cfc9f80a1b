"""Keys built from user text never collide (docs/protocol.md, "Conventions": names and keys;
docs/contract-suite.md, "Properties over whole families").

Lock, semaphore, rate-limit, period and ordered-lock keys, correlation ids, idempotency keys
(with their reactor), interrupt step paths and step names (with their run) come from user code.
An adapter that builds a backend key by joining such text with a separator, or by normalising
it, makes two different names one record: two runs share a lock, an idempotency key claimed by
one reactor blocks another. These properties draw names from an adversarial alphabet —
separators (``:``, ``/``, ``|``, ``{}``, ``.``), glob and regex characters, percent escapes,
Unicode that normalises alike (``é`` and ``e`` + combining acute, the Kelvin sign and ``K``,
the fi ligature and ``fi``, the full-width colon) and case pairs — and check that every
distinct name, and every distinct pair of names, is a record of its own.

Names hold any text without control characters or lone surrogates; run ids are reactor's own
UUID strings (docs/protocol.md, "Conventions").
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactor.model.records import RateWindow
from reactor.ports.storage import Storage
from reactor_contract._support import HOUR, step_result, teach, uid

__all__ = ["ADVERSARIAL", "LOOKALIKES", "NAMES", "PAIRS", "SEPARATORS", "KeysContract"]

#: Characters key builders trip over.
SEPARATORS = (
    ":", "::", "/", "|", "{", "}", ".", "-", "_", "*", "?", "[", "]", "%", "%3A", "\\", " ",
)
#: Texts that Unicode normalisation (NFC, NFKC) or case folding would make equal, in groups.
LOOKALIKES = (
    ("\u00e9", "e\u0301"),            # precomposed and combining acute
    ("K", "k", "\u212a"),              # case, and the Kelvin sign
    ("\ufb01", "fi"),                  # ligature
    (":", "\uff1a"),                   # full-width colon
    ("\u00df", "ss", "SS"),            # sharp s folds to ss
    ("\u0130", "i", "I"),              # dotted capital I
    ("\u00c5", "\u212b"),             # A-ring and the Angstrom sign
)
ADVERSARIAL = SEPARATORS + tuple(text for group in LOOKALIKES for text in group)
_PIECES = st.sampled_from(ADVERSARIAL) | st.characters(
    blacklist_categories=("Cs", "Cc"), max_codepoint=0x2FFFF
)
#: One name: a few pieces.
_TEXT = st.lists(_PIECES, min_size=1, max_size=5).map("".join)


@st.composite
def _names(draw: st.DrawFn) -> list[str]:
    """Distinct names, among them a name and its look-alikes (one piece swapped for each text
    of its group) and names differing only by where a separator sits."""
    head, tail = draw(_TEXT), draw(_TEXT)
    group = draw(st.sampled_from(LOOKALIKES))
    separator = draw(st.sampled_from(SEPARATORS))
    names = [head + text + tail for text in group]
    names += [head + separator + tail, head + tail + separator, separator + head + tail]
    names += draw(st.lists(_TEXT, max_size=3))
    return list(dict.fromkeys(names))


#: Distinct names (a fresh prefix is added per example, so examples never share records).
NAMES = _names()
#: Distinct (first, second) pairs that a naive join would make equal: (x, s + z) and
#: (x + s, z) for every separator s, and an unrelated pair besides.
PAIRS = st.tuples(_TEXT, _TEXT).map(
    lambda t: list(dict.fromkeys(
        [pair for s in SEPARATORS for pair in ((t[0], s + t[1]), (t[0] + s, t[1]))]
        + [(t[0], t[1])]
    ))
)

KEY_SETTINGS = settings(
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_SOURCE = 'docs/protocol.md, "Conventions"'
_MISTAKE = (
    "a backend key joined from user text with a separator it may contain, or normalised "
    "(case, Unicode), so two names share one record: escape or length-prefix each part"
)


def _distinct(kind: str, names: Sequence[str], results: Sequence[object], expected: str) -> None:
    bad = [(name, got) for name, got in zip(names, results, strict=True) if not got]
    assert not bad, teach(
        "keys",
        f"{kind}: distinct names are distinct records ({expected}); the names "
        f"{[n for n, _ in bad]!r} found another name's record among {names!r}",
        _MISTAKE,
        _SOURCE,
    )


class KeysContract:
    """Distinct names and name pairs from user text are distinct records."""

    reactor_concern = "keys"

    @pytest.mark.obligations("O-keys-1")
    @KEY_SETTINGS
    @given(names=NAMES)
    def test_lock_keys_never_collide(self, storage: Storage, names: list[str]) -> None:
        base = uid("lk")
        keys = [base + name for name in names]
        tokens = [storage.locks.acquire(key, f"owner-{i}", HOUR) for i, key in enumerate(keys)]
        _distinct("locks", keys, tokens, "each acquire by its own owner is granted")
        infos = [storage.locks.info(key) for key in keys]
        owners = [info is not None and info.owner == f"owner-{i}" for i, info in enumerate(infos)]
        _distinct("locks", keys, owners, "each reports its own owner")

    @pytest.mark.obligations("O-keys-2")
    @KEY_SETTINGS
    @given(names=NAMES)
    def test_semaphore_rate_limit_and_period_keys_never_collide(
        self, storage: Storage, names: list[str]
    ) -> None:
        base = uid("sk")
        keys = [base + name for name in names]
        granted = [storage.semaphores.acquire(key, f"h-{i}", 1, HOUR) for i, key in enumerate(keys)]
        _distinct("semaphores", keys, granted, "a limit of 1 admits each key's one holder")
        window = [RateWindow("w", 1e9, 1)]
        allowed = [storage.rate_limits.hit(key, window).allowed for key in keys]
        _distinct("rate limits", keys, allowed, "a limit of 1 admits each key's first hit")
        marked = [storage.periods.mark(key, ttl=HOUR) for key in keys]
        _distinct("periods", keys, marked, "each key's first mark wins")

    @pytest.mark.obligations("O-keys-3")
    @KEY_SETTINGS
    @given(names=NAMES)
    def test_ordered_lock_keys_never_collide(self, storage: Storage, names: list[str]) -> None:
        base = uid("ok")
        keys = [base + name for name in names]
        firsts = [storage.ordered_locks.assign(key, ttl=HOUR).nonce == 1 for key in keys]
        _distinct("ordered locks", keys, firsts, "each key's first ticket has nonce 1")

    @pytest.mark.obligations("O-keys-4")
    @KEY_SETTINGS
    @given(names=NAMES)
    def test_correlation_ids_never_collide(self, storage: Storage, names: list[str]) -> None:
        base = uid("cid")
        ids = [base + name for name in names]
        claims = [storage.claims.claim_correlation_id(cid, f"ctx-{i}") is None
                  for i, cid in enumerate(ids)]
        _distinct("correlation ids", ids, claims, "each is claimed by its own run")
        held = [storage.claims.correlation_context(cid) == f"ctx-{i}" for i, cid in enumerate(ids)]
        _distinct("correlation ids", ids, held, "each maps to its own run")

    @pytest.mark.obligations("O-keys-5")
    @KEY_SETTINGS
    @given(pairs=PAIRS)
    def test_idempotency_keys_never_collide_across_reactors(
        self, storage: Storage, pairs: list[tuple[str, str]]
    ) -> None:
        base = uid("idem")
        keyed = [(base + reactor, key) for reactor, key in pairs]
        claims = [storage.claims.claim_idempotency_key(reactor, key, f"ctx-{i}") is None
                  for i, (reactor, key) in enumerate(keyed)]
        _distinct("idempotency keys", [f"{r!r}/{k!r}" for r, k in keyed], claims,
                  "each (reactor, key) pair is claimed by its own run")

    @pytest.mark.obligations("O-keys-6")
    @KEY_SETTINGS
    @given(names=NAMES)
    def test_step_names_never_collide_within_a_run(
        self, storage: Storage, names: list[str]
    ) -> None:
        # Run ids are reactor's own (UUID strings, docs/protocol.md, "Conventions"); step
        # names and step paths are user text, and each appears under two runs.
        runs = [str(uuid.uuid4()), str(uuid.uuid4())]
        keyed = [(run, step) for step in names for run in runs]
        labels = [f"{r}/{s!r}" for r, s in keyed]
        for i, (run, step) in enumerate(keyed):
            storage.step_results.put(step_result(run, step, outcome=f'"out-{i}"'))
        outcomes = [
            (record := storage.step_results.get(run, step)) is not None
            and record.outcome == f'"out-{i}"'
            for i, (run, step) in enumerate(keyed)
        ]
        _distinct("step results", labels, outcomes, "each (run, step) pair keeps its record")
        resumed = [storage.claims.claim_interrupt_resume(run, step, f'"p-{i}"')
                   for i, (run, step) in enumerate(keyed)]
        _distinct("interrupt resumes", labels, resumed,
                  "each (run, step path) pair is claimed once")
        for run in runs:
            got = storage.claims.interrupt_resumes(run, names)
            expected = {step: f'"p-{i}"' for i, (r, step) in enumerate(keyed) if r == run}
            assert got == expected, teach(
                "keys",
                f"interrupt_resumes({run!r}, {names!r}) returns each claimed step path's own "
                f"payload: expected {expected!r}, got {got!r}",
                _MISTAKE,
                _SOURCE,
            )


class TestKeys(KeysContract):
    """The key properties against ``--reactor-storage``."""
