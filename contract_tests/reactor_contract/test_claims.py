"""First-writer-wins claims (docs/protocol.md#claims), plus expiry."""

from __future__ import annotations

from reactor.ports.storage import Storage
from reactor_contract._support import CONTEXT_TTL, assert_ttl, teach, uid
from reactor_contract.probe import Probe

__all__ = ["ClaimsContract"]


class ClaimsContract:
    """:class:`reactor.ports.ClaimStore` behaviour every adapter must show."""

    reactor_concern = "claims"

    # -- correlation ids (item 8) -------------------------------------------------------------

    def test_correlation_id_first_writer_wins(self, storage: Storage) -> None:
        cid = uid("corr")
        assert storage.claims.claim_correlation_id(cid, "ctx-a") is None
        assert storage.claims.claim_correlation_id(cid, "ctx-a") is None
        assert storage.claims.claim_correlation_id(cid, "ctx-b") == "ctx-a"
        assert storage.claims.correlation_context(cid) == "ctx-a"
        assert storage.claims.correlation_context(uid("corr")) is None

    def test_correlation_release(self, storage: Storage) -> None:
        cid = uid("corr")
        storage.claims.claim_correlation_id(cid, "ctx-a")
        assert storage.claims.release_correlation_id(cid) is True
        assert storage.claims.correlation_context(cid) is None
        assert storage.claims.release_correlation_id(cid) is False
        assert storage.claims.claim_correlation_id(cid, "ctx-b") is None

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

    def test_idempotency_key_first_claim_wins(self, storage: Storage) -> None:
        key = uid("order")
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-a") is None
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-b") == "ctx-a"
        assert storage.claims.claim_idempotency_key("payouts", key, "ctx-c") is None

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

    def test_idempotency_keys_of_any_shape(self, storage: Storage) -> None:
        odd = "a:b/c d\u00e9\u2603" + "x" * 2000
        assert storage.claims.claim_idempotency_key("orders", odd, "ctx-a") is None
        assert storage.claims.claim_idempotency_key("orders", odd + "y", "ctx-b") is None
        assert storage.claims.claim_idempotency_key("orders", odd, "ctx-c") == "ctx-a"

    def test_only_the_holder_releases_an_idempotency_key(self, storage: Storage) -> None:
        key = uid("order")
        storage.claims.claim_idempotency_key("orders", key, "ctx-a")
        assert storage.claims.release_idempotency_key("orders", key, "ctx-b") is False
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-b") == "ctx-a"
        assert storage.claims.release_idempotency_key("orders", key, "ctx-a") is True
        assert storage.claims.release_idempotency_key("orders", key, "ctx-a") is False
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-b") is None

    def test_reclaim_only_from_the_current_holder(self, storage: Storage) -> None:
        key = uid("order")
        storage.claims.claim_idempotency_key("orders", key, "ctx-a")
        assert storage.claims.reclaim_idempotency_key("orders", key, "ctx-x", "ctx-b") is False
        assert storage.claims.reclaim_idempotency_key("orders", key, "ctx-a", "ctx-b") is True
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-c") == "ctx-b"
        assert storage.claims.reclaim_idempotency_key("orders", key, "ctx-a", "ctx-c") is False
        missing = uid("order")
        assert storage.claims.reclaim_idempotency_key("orders", missing, "ctx-a", "ctx-b") is False

    def test_reclaim_restamps_retention(self, storage: Storage, probe: Probe) -> None:
        key = uid("order")
        storage.claims.claim_idempotency_key("orders", key, "ctx-a")
        assert_ttl(probe.ttl("idempotency", f"orders:{key}"), CONTEXT_TTL)
        probe.expire("idempotency", f"orders:{key}", after=30)
        assert_ttl(probe.ttl("idempotency", f"orders:{key}"), 30)
        storage.claims.reclaim_idempotency_key("orders", key, "ctx-a", "ctx-b")
        assert_ttl(probe.ttl("idempotency", f"orders:{key}"), CONTEXT_TTL)

    def test_an_expired_idempotency_key_is_free(self, storage: Storage, probe: Probe) -> None:
        key = uid("order")
        storage.claims.claim_idempotency_key("orders", key, "ctx-a")
        probe.expire("idempotency", f"orders:{key}")
        assert storage.claims.release_idempotency_key("orders", key, "ctx-a") is False
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-b") is None
        assert storage.claims.claim_idempotency_key("orders", key, "ctx-c") == "ctx-b"

    # -- interrupt resume claims (items 22-23) --------------------------------------------------

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

    def test_interrupt_attempts_count_per_step(self, storage: Storage) -> None:
        ctx = uid("ctx")
        assert storage.claims.increment_interrupt_attempts(ctx, "approve") == 1
        assert storage.claims.increment_interrupt_attempts(ctx, "approve") == 2
        assert storage.claims.increment_interrupt_attempts(ctx, "review") == 1
        assert storage.claims.increment_interrupt_attempts(uid("ctx"), "approve") == 1

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


class TestClaims(ClaimsContract):
    """The claims contract against ``--reactor-storage``."""
