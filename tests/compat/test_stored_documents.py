"""Runs stored by an earlier version still load and mean the same (docs/protocol.md, "Stored
failures"; docs/architecture.md, "Layers").

``stored/contexts.json`` holds context documents exactly as a memory storage kept them before
the exception hierarchy moved to ``reactor.errors`` and the records to ``reactor.model``: a
failed run, a run that failed validating its inputs, a completed run holding an idempotency
key, a failed run and its retry (linked both ways), a queued run with a sealed input and the
same run once quarantined because its secret key was missing (one id: stored one at a time),
and a background run parked on a held lock.
The reactors below carry the names those runs were stored under. Never regenerate the file:
its value is that an older version wrote it.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from reactor import Background, Failure, Input, Reactor, RunStatus, Step, input, step, with_lock
from reactor.errors import RunStateError
from reactor.model.records import ContextRecord
from reactor.ports.payloads import RunPayload, job
from reactor.testing import TestEnvironment

STORED: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "stored" / "contexts.json").read_text(encoding="utf-8")
)


class Charge(Step):
    amount = Input(Decimal)

    def run(self) -> dict[str, str]:
        if self.inputs.amount > 100:
            raise ValueError("card declined")
        return {"charged": str(self.inputs.amount)}

    def undo(self) -> None:
        return None


class Ship(Step):
    order = Input(str)

    def run(self) -> None:
        raise RuntimeError("carrier down")


class Order(Reactor, name="compat.order"):
    amount = Input(Decimal, gt=0)
    order_id = Input(str)
    charge = step(Charge, amount=input("amount"))
    ship = step(Ship, order=input("order_id"))


class Paid(Reactor, name="compat.paid"):
    amount = Input(Decimal, gt=0)
    charge = step(Charge, amount=input("amount"))
    returns = "charge"


class Queued(Reactor, name="compat.queued"):
    amount = Input(Decimal, gt=0)
    token = Input(str, redact=True)
    charge = step(Charge, amount=input("amount"))
    background = Background(all=True)


class Locked(Reactor, name="compat.locked"):
    sku = Input(str)
    coordination = with_lock(key=lambda i: f"sku:{i['sku']}", ttl=30)
    charge = step(Charge, amount=Decimal("1"))
    background = Background(all=True)


#: The queued run before its quarantine: the same run id as ``quarantined_wrong_key``.
BEFORE_QUARANTINE = "queued_sealed"


def _store(environment: TestEnvironment, name: str) -> None:
    document = STORED[name]
    environment.runtime.storage.contexts.save(ContextRecord(
        context_id=document["context_id"], reactor=document["reactor"],
        status=document["status"], document=json.dumps(document),
        created_at=document["created_at"], updated_at=document["updated_at"],
        parent_context_id=document["parent_context_id"],
        root_context_id=document["root_context_id"],
    ))


@pytest.fixture
def env() -> Any:
    with TestEnvironment() as environment:
        for name in STORED:
            if name != BEFORE_QUARANTINE:
                _store(environment, name)
        yield environment


def _id(name: str) -> str:
    return str(STORED[name]["context_id"])


def test_every_stored_run_loads_with_its_status(env: TestEnvironment) -> None:
    assert len(STORED) == 8
    for name, document in STORED.items():
        if name == BEFORE_QUARANTINE:
            continue
        view = Reactor.find(_id(name))
        assert view.status is RunStatus(document["status"]), name
        assert view.reactor == document["reactor"]


def test_stored_failures_name_reactors_exceptions_under_their_current_module(
    env: TestEnvironment,
) -> None:
    stored = STORED["failed_validation"]["failure"]["v"]["exception_class"]
    assert stored == "reactor.model.errors.InputValidationError"  # as the old version wrote it
    view = Paid.find(_id("failed_validation"))
    assert isinstance(view.failure, Failure)
    assert view.failure.exception_class == "reactor.errors.InputValidationError"
    assert view.failure.validation_errors == {"amount": ["Input should be greater than 0"]}
    quarantined = Queued.find(_id("quarantined_wrong_key"))
    assert isinstance(quarantined.failure, Failure)
    assert quarantined.failure.exception_class == "reactor.errors.SecretKeyError"
    plain = Order.find(_id("failed_step"))
    assert isinstance(plain.failure, Failure) and plain.failure.exception_class == "RuntimeError"


def test_a_run_that_failed_validating_its_inputs_is_still_refused_a_retry(
    env: TestEnvironment,
) -> None:
    with pytest.raises(RunStateError, match="failed before any step ran"):
        Paid.retry(_id("failed_validation"))


def test_run_links_and_idempotency_keys_read_back(env: TestEnvironment) -> None:
    assert Paid.find(_id("completed_with_key")).idempotency_key == "order-7"
    assert Order.find(_id("retried_original")).retries == (_id("retry"),)
    assert Order.find(_id("retry")).retried_from == _id("retried_original")


def test_a_sealed_input_stays_redacted_and_sealed() -> None:
    assert STORED[BEFORE_QUARANTINE]["inputs"]["token"]["__t"] == "reactor.Secret"
    assert "tok-secret" not in json.dumps(STORED[BEFORE_QUARANTINE])
    with TestEnvironment() as environment:
        _store(environment, BEFORE_QUARANTINE)
        view = Queued.find(_id(BEFORE_QUARANTINE))
    assert view.status is RunStatus.RUNNING
    assert view.inputs["token"] == "[REDACTED]" and view.inputs["amount"] == Decimal("3")


def test_a_run_parked_on_a_lock_by_the_old_version_resumes_and_completes(
    env: TestEnvironment,
) -> None:
    assert STORED["parked_on_lock"]["private_data"]["waiting"]["primitive"] == "lock"
    env.runtime.router.enqueue(job(RunPayload(context_id=_id("parked_on_lock"),
                                              reactor="compat.locked")))
    env.run_until_idle()
    view = Locked.find(_id("parked_on_lock"))
    assert view.status is RunStatus.COMPLETED
    assert view.results["charge"] == {"charged": "1"}
