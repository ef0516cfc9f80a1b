"""A worker refuses to start when it would open sealed runs without a key (docs/security.md,
"When a key is wrong or missing"): otherwise every sealed run it picked up would be quarantined
as ``failed``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reactor import Input, Reactor, config, input, step
from reactor.config import Runtime
from reactor.errors import ConfigurationError
from reactor.jobs.worker import Worker
from reactor.model.secrets import ENV_VAR, generate_key


class Pay(Reactor, name="test_worker_secrets.pay"):
    card = Input(str, redact=True)

    @step(card=input("card"))
    def charge(inputs: Any, ctx: Any) -> str:
        return "ok"


URL = "mongomock://worker-secrets/reactor"


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(ENV_VAR, raising=False)
    yield
    config.reset()


def _worker(**settings: Any) -> tuple[Runtime, Worker]:
    runtime = config.configure(storage=URL, router=URL, **settings)
    return runtime, Worker(runtime, threads=1)


@pytest.mark.mongodb
def test_a_worker_without_a_key_refuses_to_start(no_key: None) -> None:
    _, worker = _worker()
    with pytest.raises(ConfigurationError) as info:
        worker.start()
    message = str(info.value)
    assert ENV_VAR in message and "redact=True" in message
    assert worker.processed == 0


@pytest.mark.mongodb
@pytest.mark.parametrize("settings", [{"secret_keys": [generate_key()]},
                                      {"allow_plaintext_secrets": True}])
def test_a_worker_with_a_key_or_the_opt_out_starts(
    no_key: None, settings: dict[str, Any]
) -> None:
    _, worker = _worker(**settings)
    worker.start()
    assert worker.stop(5)
