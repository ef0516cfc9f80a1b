"""First-writer-wins claims (docs/protocol.md#claims), plus expiry."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from reactor.ports.storage import Storage
from reactor_contract._support import CONTEXT_TTL, assert_ttl, teach, uid
from reactor_contract.probe import Probe
from reactor_contract.test_concurrency import race_rounds

__all__ = ["ClaimsContract"]


class ClaimsContract:
    """:class:`reactor.ports.ClaimStore` behaviour every adapter must show."""

    reactor_concern = "claims"

    # -- correlation ids (item 8) -------------------------------------------------------------

    @pytest.mark.obligations("O-claims-1", "O-claims-2")
    def test_correlation_id_first_writer_wins(self, storage: Storage) -> None:
        cid = uid("corr")
        assert storage.claims.claim_correlation_id(cid, "ctx-a") is None
        assert storage.claims.claim_correlation_id(cid, "ctx-a") is None
        assert storage.claims.claim_correlation_id(cid, "ctx-b") == "ctx-a"
        assert storage.claims.correlation_context(cid) == "ctx-a"
        assert storage.claims.correlation_context(uid("corr")) is None

    @pytest.mark.obligations("O-claims-2", "O-claims-3")
    def test_correlation_release(self, storage: Storage) -> None:
        cid = uid("corr")
        storage.claims.claim_correlation_id(cid, "ctx-a")
        assert storage.claims.release_correlation_id(cid) is True
        assert storage.claims.correlation_context(cid) is None
        assert storage.claims.release_correlation_id(cid) is False
        assert storage.claims.claim_correlation_id(cid, "ctx-b") is None

    @pytest.mark.obligations("O-claims-4", "O-claims-15")
    def test_an_expired_correlation_can_be_claimed_again(
        self, storage: Storage, probe: Probe
    ) -> None:
        cid = uid("corr")
        storage.claims.claim_correlation_id(cid, "ctx-a")
        assert_ttl(probe.ttl("correlation", cid), CONTEXT_TTL)
        probe.expire("correlation", cid)
        assert storage.claims.correlation_context(cid) is None
        assert storage.claims.claim_correlation_id(cid, "ctx-b") is None
        assert storage.claims.correlation_context(cid) == "ctx-b"

    # -- idempotency keys (items 24-25) ---------------------------------------------------------

    @pytest.mark.obligations("O-claims-5", "O-claims-6")
    def test_idempotency_key_first_claim_wins(self, storage: Storage) -> None:
        key = uid("order")
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-a") is None
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-b") == "ctx-a"
        assert storage.claims.claim_idempotency_key("payouts", key, "ctx-c") is None

    @pytest.mark.obligations("O-claims-5")
    def test_a_holder_reclaiming_its_idempotency_key_is_told_it_holds_it(
        self, storage: Storage
    ) -> None:
        key = uid("order")
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-a") is None
        again = storage.claims.claim_idempotency_key("orders", key, "ctx-a")
        assert again == "ctx-a", teach(
            "claims",
            "claim_idempotency_key answers None only to the call that claimed the key; a "
            f"second claim by the run already holding it answers its own id, got {again!r}",
            "answering None when the stored holder is the caller (as claim_correlation_id "
            "does): the engine reads None as 'this call claimed it' and starts the run a "
            "second time",
            'docs/protocol.md, "Claims"',
        )
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-b") == "ctx-a"

    @pytest.mark.obligations("O-claims-7")
    def test_idempotency_keys_of_any_shape(self, storage: Storage) -> None:
        odd = "a:b/c d\u00e9\u2603" + "x" * 2000
        assert storage.claims.claim_idempotency_key("orders", odd, "ctx-a") is None
        assert storage.claims.claim_idempotency_key("orders", odd + "y", "ctx-b") is None
        assert storage.claims.claim_idempotency_key("orders", odd, "ctx-c") == "ctx-a"

    @pytest.mark.obligations("O-claims-8")
    def test_only_the_holder_releases_an_idempotency_key(self, storage: Storage) -> None:
        key = uid("order")
        storage.claims.claim_idempotency_key("orders", key, "ctx-a")
        assert storage.claims.release_idempotency_key("orders", key, "ctx-b") is False
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-b") == "ctx-a"
        assert storage.claims.release_idempotency_key("orders", key, "ctx-a") is True
        assert storage.claims.release_idempotency_key("orders", key, "ctx-a") is False
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-b") is None

    @pytest.mark.obligations("O-claims-9")
    def test_reclaim_only_from_the_current_holder(self, storage: Storage) -> None:
        key = uid("order")
        storage.claims.claim_idempotency_key("orders", key, "ctx-a")
        assert storage.claims.reclaim_idempotency_key("orders", key, "ctx-x", "ctx-b") is False
        assert storage.claims.reclaim_idempotency_key("orders", key, "ctx-a", "ctx-b") is True
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-c") == "ctx-b"
        assert storage.claims.reclaim_idempotency_key("orders", key, "ctx-a", "ctx-c") is False
        missing = uid("order")
        assert storage.claims.reclaim_idempotency_key("orders", missing, "ctx-a", "ctx-b") is False

    @pytest.mark.obligations("O-claims-10", "O-claims-15")
    def test_reclaim_restamps_retention(self, storage: Storage, probe: Probe) -> None:
        key = uid("order")
        storage.claims.claim_idempotency_key("orders", key, "ctx-a")
        assert_ttl(probe.ttl("idempotency", f"orders:{key}"), CONTEXT_TTL)
        probe.expire("idempotency", f"orders:{key}", after=30)
        assert_ttl(probe.ttl("idempotency", f"orders:{key}"), 30)
        storage.claims.reclaim_idempotency_key("orders", key, "ctx-a", "ctx-b")
        assert_ttl(probe.ttl("idempotency", f"orders:{key}"), CONTEXT_TTL)

    @pytest.mark.obligations("O-claims-11")
    def test_an_expired_idempotency_key_is_free(self, storage: Storage, probe: Probe) -> None:
        key = uid("order")
        storage.claims.claim_idempotency_key("orders", key, "ctx-a")
        probe.expire("idempotency", f"orders:{key}")
        assert storage.claims.release_idempotency_key("orders", key, "ctx-a") is False
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-b") is None
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-c") == "ctx-b"

    # -- interrupt resume claims (items 22-23) --------------------------------------------------

    @pytest.mark.obligations("O-claims-12", "O-claims-13")
    def test_interrupt_resume_is_claimed_once_with_the_first_payload(
        self, storage: Storage
    ) -> None:
        ctx = uid("ctx")
        assert storage.claims.claim_interrupt_resume(ctx, "approve", '{"ok":true}') is True
        assert storage.claims.claim_interrupt_resume(ctx, "approve", '{"ok":false}') is False
        assert storage.claims.claim_interrupt_resume(ctx, "child.review", '"x"') is True
        resumes = storage.claims.interrupt_resumes(ctx, ["approve", "child.review", "other"])
        assert resumes == {"approve": '{"ok":true}', "child.review": '"x"'}
        assert storage.claims.interrupt_resumes(ctx, []) == {}
        assert storage.claims.interrupt_resumes(uid("ctx"), ["approve"]) == {}

    @pytest.mark.obligations("O-claims-14")
    def test_interrupt_attempts_count_per_step(self, storage: Storage) -> None:
        ctx = uid("ctx")
        assert storage.claims.increment_interrupt_attempts(ctx, "approve") == 1
        assert storage.claims.increment_interrupt_attempts(ctx, "approve") == 2
        assert storage.claims.increment_interrupt_attempts(ctx, "review") == 1
        assert storage.claims.increment_interrupt_attempts(uid("ctx"), "approve") == 1

    @pytest.mark.obligations("O-claims-15", "O-claims-16")
    def test_interrupt_records_carry_retention(self, storage: Storage, probe: Probe) -> None:
        ctx = uid("ctx")
        storage.claims.claim_interrupt_resume(ctx, "approve", "1")
        storage.claims.increment_interrupt_attempts(ctx, "approve")
        assert_ttl(probe.ttl("interrupt", f"{ctx}:approve"), CONTEXT_TTL)
        probe.expire("interrupt", f"{ctx}:approve", "attempts", after=30)
        storage.claims.increment_interrupt_attempts(ctx, "approve")
        assert_ttl(probe.ttl("interrupt", f"{ctx}:approve", "attempts"), CONTEXT_TTL)
        probe.expire("interrupt", f"{ctx}:approve")
        assert storage.claims.interrupt_resumes(ctx, ["approve"]) == {}
        assert storage.claims.increment_interrupt_attempts(ctx, "approve") == 1

    @pytest.mark.obligations("O-claims-12", "O-claims-13")
    def test_a_cancel_request_is_a_resume_claim_at_the_reserved_path(
        self, storage: Storage
    ) -> None:
        ctx = uid("ctx")
        assert storage.claims.claim_interrupt_resume(ctx, "approve", '"yes"') is True
        assert storage.claims.claim_interrupt_resume(ctx, "@cancel", '{"reason":"r"}') is True
        assert storage.claims.claim_interrupt_resume(ctx, "@cancel", '{"reason":"s"}') is False
        resumes = storage.claims.interrupt_resumes(ctx, ["@cancel", "approve"])
        assert resumes == {"@cancel": '{"reason":"r"}', "approve": '"yes"'}, teach(
            "claims",
            "a cancel request is one claim_interrupt_resume at the reserved step path "
            f"'@cancel', claimed once and read back like any other path (got {resumes!r})",
            "a step path read as a pattern, or '@' escaped on write and not on read",
            'docs/protocol.md, "Claims"',
        )

    # -- racing claims (first writer wins under concurrency) -------------------------------------

    @pytest.mark.obligations("O-claims-1", "O-claims-5", "O-claims-12", "O-claims-14",
                             "O-claims-17")
    def test_racing_claims_have_one_winner_and_racing_increments_distinct_counts(
        self, storage: Storage
    ) -> None:
        claims = storage.claims

        def one_winner(what: str, winners: int, results: Sequence[object]) -> None:
            assert winners == 1, teach(
                "claims",
                f"of 8 racing {what} exactly one wins (got {results!r})",
                "a claim that reads the key and then writes it (no compare-and-set, no "
                "server-side script): two racers that both read it free both win",
                'docs/protocol.md, "Claims"',
            )

        def correlation(key: str, results: list[str | None]) -> None:
            one_winner("correlation id claims", results.count(None), results)
            holder = claims.correlation_context(key)
            assert holder is not None and all(r in (None, holder) for r in results)

        def idempotency(key: str, results: list[str | None]) -> None:
            one_winner("idempotency key claims", results.count(None), results)

        def resume(run: str, results: list[bool]) -> None:
            one_winner("interrupt resume claims", results.count(True), results)
            winner = f'"p{results.index(True)}"'
            assert claims.interrupt_resumes(run, ["approve"]) == {"approve": winner}

        def attempts(run: str, results: list[int]) -> None:
            assert sorted(results) == list(range(1, 9)), teach(
                "claims",
                f"8 racing increment_interrupt_attempts return the counts 1..8, got {results}",
                "a counter read and then written back (lost updates)",
                'docs/protocol.md, "Claims"',
            )

        race_rounds(8, lambda key, i: claims.claim_correlation_id(key, f"ctx-{i}"),
                    correlation, prefix="corr")
        race_rounds(8, lambda key, i: claims.claim_idempotency_key("orders", key, f"ctx-{i}"),
                    idempotency, prefix="order")
        race_rounds(8, lambda run, i: claims.claim_interrupt_resume(run, "approve", f'"p{i}"'),
                    resume, prefix="ctx")
        race_rounds(8, lambda run, i: claims.increment_interrupt_attempts(run, "approve"),
                    attempts, prefix="ctx")


class TestClaims(ClaimsContract):
    """The claims contract against ``--reactor-storage``."""
