"""Secrets at rest on every backend (docs/security.md): a ``redact=True`` value never reaches a
stored document, a router payload, a ``reactor runs`` output or a DEBUG log of reactor or of the
drivers; it is decrypted only where a step, undo or compensate runs; a wrong key quarantines
the run as ``failed``; a real backend without a key refuses to run unless plaintext is allowed
explicitly.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from typer.testing import CliRunner

from reactor import (
    Background,
    ConfigurationError,
    Input,
    Reactor,
    Step,
    compose,
    config,
    element,
    input,
    map_step,
    result,
    step,
)
from reactor.cli import runs as runs_cli
from reactor.cli._common import app
from reactor.config import Runtime
from reactor.engine import secret_policy
from reactor.engine.dispatch import DispatchHandle
from reactor.engine.quarantine import quarantine_info
from reactor.jobs.worker import Worker
from reactor.memory import LocalRouter, MemoryStorage
from reactor.model.results import Failure
from reactor.model.secrets import ENV_VAR, generate_key
from reactor.model.status import RunStatus
from reactor.ports.router import Job
from tests.backends import BACKENDS, backend_urls

SECRET = "tok_visa_SECRET_4242"
REAL_BACKENDS = BACKENDS[1:]
DRIVER_LOGGERS = ("reactor", "pymongo", "botocore", "redis")

seen_in_bodies: list[str] = []  # what the step, undo and compensate bodies received


class Authorize(Step):
    amount = Input(Decimal, gt=0)
    card_token = Input(str, redact=True)

    def run(self) -> dict[str, str]:
        seen_in_bodies.append(self.inputs.card_token)
        return {"id": "auth-1"}

    def undo(self) -> None:
        seen_in_bodies.append(self.inputs.card_token)


class Capture(Step):
    authorization = Input(str)
    card_token = Input(str)  # not declared secret here: fed from a secret, so sealed anyway

    def run(self) -> None:
        raise ConnectionError("gateway timeout")

    def compensate(self) -> None:
        seen_in_bodies.append(self.inputs.card_token)


class Failing(Reactor, name="test_secrets_at_rest.failing"):
    amount = Input(Decimal, gt=0)
    card_token = Input(str, redact=True)
    authorize = step(Authorize, amount=input("amount"), card_token=input("card_token"))
    capture = step(Capture, authorization=result("authorize", "id"),
                   card_token=input("card_token"))


class Charge(Reactor, name="test_secrets_at_rest.charge"):
    card_token = Input(str, redact=True)
    authorize = step(Authorize, amount=Decimal("1"), card_token=input("card_token"))


class Tokenize(Reactor, name="test_secrets_at_rest.tokenize"):
    token = Input(str)  # plain in the child: the parent feeds it a secret

    @step(token=input("token"))
    def check(inputs: Any, ctx: Any) -> int:
        seen_in_bodies.append(inputs.token)
        return len(inputs.token)


class Completing(Reactor, name="test_secrets_at_rest.completing"):
    card_token = Input(str, redact=True)
    cards = Input(list)
    authorize = step(Authorize, amount=Decimal("2"), card_token=input("card_token"))
    charge = compose(Charge, card_token=input("card_token"))
    tokenize = compose(Tokenize, token=input("card_token"))
    each = map_step(Tokenize, source=input("cards"), args={"token": input("card_token")})


class Queued(Reactor, name="test_secrets_at_rest.queued"):
    card_token = Input(str, redact=True)
    background = Background(all=True)
    authorize = step(Authorize, amount=Decimal("3"), card_token=input("card_token"))


class Secretive(Reactor, name="test_secrets_at_rest.secretive"):
    cards = Input(list, redact=True)
    each = map_step(Tokenize, source=input("cards"), args={"token": element("each")})


# ------------------------------------------------------------------------------ backends


@dataclass
class Backend:
    """A configured runtime, what it saved and enqueued, and a raw dump of the store."""

    name: str
    runtime: Runtime
    token: str
    service_url: Callable[[str], str]
    saved: list[str] = field(default_factory=list)
    enqueued: list[str] = field(default_factory=list)

    def reconfigure(self, **settings: Any) -> Runtime:
        self.runtime = config.configure(
            storage=self.runtime.storage, router=self.runtime.router, **settings
        )
        return self.runtime

    def raw_dump(self) -> str:
        """Everything the backend holds for this test, read with the native client."""
        if self.name == "memory":
            return "\n".join(self.saved)
        if self.name == "redis":
            import redis

            client = redis.Redis.from_url(self.service_url("redis"))
            parts = []
            for key in client.scan_iter(match=f"*{self.token}*"):
                kind = client.type(key).decode()
                if kind == "string":
                    parts.append(repr(client.get(key)))
                elif kind == "hash":
                    parts.append(repr(client.hgetall(key)))
                elif kind == "list":
                    parts.append(repr(client.lrange(key, 0, -1)))
                elif kind == "set":
                    parts.append(repr(client.smembers(key)))
                elif kind == "zset":
                    parts.append(repr(client.zrange(key, 0, -1, withscores=True)))
                elif kind == "stream":
                    parts.append(repr(client.xrange(key)))
            client.close()
            assert parts, "nothing stored under the test prefix"
            return "\n".join(parts)
        if self.name in ("mongomock", "mongodb"):
            if self.name == "mongomock":
                from reactor_mongodb.testing import client_for

                client: Any = client_for("secrets")
            else:
                import pymongo

                client = pymongo.MongoClient(self.service_url("mongodb_wire"))
            parts = []
            for db_name in client.list_database_names():
                database = client[db_name]
                for coll in database.list_collection_names():
                    if coll.startswith(f"{self.token}_"):
                        parts.extend(repr(doc) for doc in database[coll].find())
            if self.name == "mongodb":
                client.close()
            assert parts, "nothing stored under the test prefix"
            return "\n".join(parts)
        if self.name == "postgres":
            import psycopg

            with psycopg.connect(self.service_url("postgres")) as conn:
                rows = conn.execute(
                    "SELECT collection, key, value FROM reactor_tests.documents"
                    " WHERE collection LIKE %s UNION ALL"
                    " SELECT queue, id, convert_from(body, 'UTF8') FROM reactor_tests.jobs"
                    " WHERE queue LIKE %s",
                    (f"{self.token}:%", f"{self.token}:%"),
                ).fetchall()
            assert rows, "nothing stored under the test prefix"
            return "\n".join(repr(row) for row in rows)
        import boto3

        dynamo = boto3.client("dynamodb", region_name="us-east-1",
                              endpoint_url=self.service_url("moto"))
        # only this test's partitions travel (and get logged by botocore): the shared table
        # holds other tests' runs, the plaintext opt-out's among them
        pages = dynamo.get_paginator("scan").paginate(
            TableName="reactor-secrets", FilterExpression="begins_with(pk, :token)",
            ExpressionAttributeValues={":token": {"S": self.token}},
        )
        parts = [repr(item) for page in pages for item in page["Items"]]
        assert parts, "nothing stored under the test prefix"
        return "\n".join(parts)


def _configure(name: str, service_url: Callable[[str], str], token: str,
               **settings: Any) -> Runtime:
    if name == "memory":
        return config.configure(storage=MemoryStorage(), router=LocalRouter(), **settings)
    storage, router = backend_urls(name, service_url, token, area="secrets")
    return config.configure(storage=storage, router=router, **settings)


@pytest.fixture
def token() -> str:
    return f"sec{uuid.uuid4().hex[:10]}"


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> str:
    """One key in ``REACTOR_SECRET_KEYS`` (set the way an operator would)."""
    key = generate_key()
    monkeypatch.setenv(ENV_VAR, key)
    return key


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, service_url: Callable[[str], str], token: str,
    keys: str, monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Backend]:
    runtime = _configure(request.param, service_url, token)
    spy = Backend(request.param, runtime, token, service_url)
    contexts = runtime.storage.contexts
    original_save = contexts.save
    original_enqueue = runtime.router.enqueue

    original_append = contexts.append

    def save(record: Any, *args: Any, **kwargs: Any) -> Any:
        spy.saved.append(record.document)
        spy.saved.extend(record.segments)
        return original_save(record, *args, **kwargs)

    def append(delta: Any, *args: Any, **kwargs: Any) -> Any:
        spy.saved.append(delta.segment)
        return original_append(delta, *args, **kwargs)

    def enqueue(job: Job, *args: Any, **kwargs: Any) -> Any:
        spy.enqueued.append(job.to_json())
        return original_enqueue(job, *args, **kwargs)

    monkeypatch.setattr(contexts, "save", save)
    monkeypatch.setattr(contexts, "append", append)
    monkeypatch.setattr(runtime.router, "enqueue", enqueue)
    seen_in_bodies.clear()
    yield spy
    config.reset()


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    for name in DRIVER_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def _cli(runtime: Runtime, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    monkeypatch.setattr(runs_cli, "_runtime", lambda *_args, **_kw: runtime)
    out = CliRunner().invoke(app, list(args))
    assert out.exit_code == 0, out.output
    return out.output


# ------------------------------------------------------------------------------ tests


def test_a_secret_never_leaves_the_process_in_clear_on_any_backend(
    backend: Backend, debug_logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = Failing.run(amount=Decimal("12.50"), card_token=SECRET)
    assert isinstance(failed, Failure) and failed.step_name == "capture"
    done = Completing.run(card_token=SECRET, cards=[1, 2])
    assert done.success, done
    handle = Queued.run(card_token=SECRET)
    assert isinstance(handle, DispatchHandle)
    assert Worker(backend.runtime, liveness_wait=0.0).run_pending() >= 1
    assert handle.status() is RunStatus.COMPLETED
    # the bodies got the plaintext: Failing's run, compensate and undo (3); Completing's step,
    # composed steps (2) and map elements (2); Queued's step in the worker (1)
    assert seen_in_bodies.count(SECRET) == 3 + 5 + 1
    runs = [failed.run_id, done.run_id, handle.run_id]

    # stored documents: every write, and what the backend holds now (native client)
    assert backend.saved and all(SECRET not in doc for doc in backend.saved)
    assert any("reactor.Secret" in doc for doc in backend.saved)
    assert SECRET not in backend.raw_dump()
    # router payloads
    assert backend.enqueued and all(SECRET not in body for body in backend.enqueued)
    # views: find(), Failure, runs show (plain and --json), runs list
    assert Failing.find(failed.run_id or "").inputs["card_token"] == "[REDACTED]"
    for run_id in runs:
        assert run_id is not None
        shown = _cli(backend.runtime, monkeypatch, "runs", "show", run_id)
        as_json = _cli(backend.runtime, monkeypatch, "runs", "show", run_id, "--json")
        assert SECRET not in shown and SECRET not in as_json
        assert json.loads(as_json)["document"]["inputs"]["card_token"] == "[REDACTED]"
    assert SECRET not in repr(failed) and SECRET not in repr(Failing.find(failed.run_id or ""))
    listed = _cli(backend.runtime, monkeypatch, "runs", "list", "--json")
    assert SECRET not in listed
    assert {r["run_id"] for r in json.loads(listed)["runs"]} >= set(runs)
    # DEBUG logs of reactor and the drivers
    if backend.name in ("mongodb", "dynamodb"):  # these drivers log the documents they send
        assert "reactor.Secret" in debug_logs.text
    assert SECRET not in debug_logs.text
    assert all(SECRET not in str(r.args) for r in debug_logs.records)


def test_a_map_over_a_secret_seals_every_element_input(backend: Backend) -> None:
    outcome = Secretive.run(cards=[SECRET, SECRET + "x"])
    assert outcome.success, outcome
    assert seen_in_bodies == [SECRET, SECRET + "x"]
    assert all(SECRET not in doc for doc in backend.saved)


def test_a_wrong_key_quarantines_the_run_as_failed_with_the_reason(backend: Backend) -> None:
    handle = Queued.run(card_token=SECRET)
    assert isinstance(handle, DispatchHandle)
    runtime = backend.reconfigure(secret_keys=(generate_key("other"),))
    worker = Worker(runtime, liveness_wait=0.0)
    assert worker.run_pending() == 1
    assert seen_in_bodies == []  # never ran with a wrong key
    view = Queued.find(handle.run_id)
    assert view.status is RunStatus.FAILED
    assert isinstance(view.failure, Failure) and view.failure.is_retryable is False
    assert view.failure.exception_class == "reactor.errors.SecretKeyError"
    assert "no secret key with id" in view.failure.message
    record = runtime.storage.contexts.load(handle.run_id)
    assert record is not None and record.status == "failed"
    assert all(SECRET not in text for text in (record.document, *record.segments))
    # never lost: the original (still encrypted) document is kept for an operator
    stored = Queued.find(handle.run_id)
    assert stored.status is RunStatus.FAILED
    from reactor.engine.checkpoint import load_context
    from reactor.engine.env import make_env

    ctx = load_context(make_env(runtime), handle.run_id, open_secrets=False)
    assert ctx is not None
    info = quarantine_info(ctx)
    assert info is not None and "reactor.Secret" in info.original_document
    # never re-executed: nothing is pending any more
    assert worker.run_pending() == 0


def test_keys_rotate_encrypt_with_the_first_decrypt_with_any(backend: Backend) -> None:
    old = generate_key("old")
    runtime = backend.reconfigure(secret_keys=(old,))
    handle = Queued.run(card_token=SECRET)
    assert isinstance(handle, DispatchHandle)
    runtime = backend.reconfigure(secret_keys=(generate_key("new"), old))
    assert Worker(runtime, liveness_wait=0.0).run_pending() >= 1
    assert seen_in_bodies == [SECRET]
    assert Queued.find(handle.run_id).status is RunStatus.COMPLETED
    record = runtime.storage.contexts.load(handle.run_id)
    assert record is not None
    stored = "".join((record.document, *record.segments))  # re-sealed whole, then appended
    assert '"kid":"new"' in stored and '"kid":"old"' not in stored


@pytest.mark.parametrize("name", REAL_BACKENDS)
def test_a_real_backend_without_a_key_refuses_to_run(
    name: str, service_url: Callable[[str], str], token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    runtime = _configure(name, service_url, token)
    try:
        with pytest.raises(ConfigurationError) as info:
            Failing.run(amount=Decimal("1"), card_token=SECRET)
        assert ENV_VAR in str(info.value) and "secret_keys" in str(info.value)
        assert SECRET not in str(info.value)
        assert runtime.storage.contexts.page(limit=10).runs == ()  # nothing was stored
    finally:
        config.reset()


def test_the_memory_backend_keeps_secrets_in_process_without_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    config.configure(storage="memory://", router="inline://")
    try:
        outcome = Charge.run(card_token=SECRET)
        assert outcome.success
        assert Charge.find(outcome.run_id or "").inputs["card_token"] == "[REDACTED]"
    finally:
        config.reset()


@pytest.mark.parametrize("name", REAL_BACKENDS)
def test_the_plaintext_opt_out_works_and_warns_once(
    name: str, service_url: Callable[[str], str], token: str,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(secret_policy, "_warned", False)
    caplog.set_level(logging.WARNING, logger="reactor.secrets")
    runtime = _configure(name, service_url, token, allow_plaintext_secrets=True)
    try:
        first = Charge.run(card_token=SECRET)
        second = Charge.run(card_token=SECRET)
        assert first.success and second.success
        record = runtime.storage.contexts.load(first.run_id or "")
        assert record is not None and SECRET in record.document  # in clear, as asked
        assert Charge.find(first.run_id or "").inputs["card_token"] == "[REDACTED]"
        warnings = [r for r in caplog.records if r.name == "reactor.secrets"]
        assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
        assert "UNENCRYPTED" in warnings[0].getMessage()
    finally:
        config.reset()


@pytest.mark.parametrize("where", ["environment", "setting"])
def test_a_malformed_key_fails_configure_and_keeps_the_previous_runtime(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad key is a configuration error at start-up (a worker exits 2), not a failure of the
    first run that holds a secret (docs/security.md, "Keys")."""
    previous = config.configure(storage="memory://", router="inline://")
    try:
        with pytest.raises(ConfigurationError) as info:
            if where == "environment":
                monkeypatch.setenv(ENV_VAR, "not-a-key")
                config.configure(storage="memory://", router="inline://")
            else:
                config.configure(storage="memory://", router="inline://",
                                 secret_keys=["not-a-key"])
        assert ENV_VAR in str(info.value) and "not-a-key" not in str(info.value)
        assert config.current() is previous
    finally:
        config.reset()
