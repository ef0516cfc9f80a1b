"""``reactor dead-letters list|show|requeue|purge`` on every router (docs/workers.md, "Dead
letters").

Each backend test builds its own router from the same URL the command gets (a fresh prefix per
test) to make dead letters and to receive requeued jobs; the command builds and closes its own.
The in-process ``local://`` router cannot be shared across two builds, so its command is handed
the test's router (kept open) through ``reactor.config.router_from_url``.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from reactor_contract.probe import UnsupportedBody, load_router_probe
from typer.testing import CliRunner

from reactor import cli, config
from reactor.memory import LocalRouter
from reactor.ports.router import DeadLetterAdmin, Delivery, Job, Router

runner = CliRunner()

BACKENDS = [
    pytest.param("memory", marks=pytest.mark.memory),
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("redis_cluster", marks=pytest.mark.redis),
    pytest.param("mongomock", marks=pytest.mark.mongodb),
    pytest.param("mongodb_wire", marks=pytest.mark.mongodb),
    pytest.param("sqs", marks=pytest.mark.dynamodb),
]


class _KeptOpen(LocalRouter):
    """A ``LocalRouter`` the command cannot close (the test closes it)."""

    def close(self) -> None:
        """Kept open: the test owns it."""


@dataclass
class Backend:
    """A router under test: the URL the command gets and the test's own router on it."""

    name: str
    url: str
    router: Router

    @property
    def admin(self) -> DeadLetterAdmin:
        assert isinstance(self.router, DeadLetterAdmin)
        return self.router


def _with_query(url: str, **params: str) -> str:
    extra = "&".join(f"{k}={v}" for k, v in params.items())
    return f"{url}{'&' if '?' in url else '?'}{extra}"


def _url(name: str, service_url: Callable[[str], str], token: str) -> str:
    if name == "memory":
        return "local://"
    if name in ("redis", "redis_cluster"):
        return _with_query(service_url(name), prefix=token)
    if name == "mongomock":
        return f"mongomock://{token}/reactor?prefix={token}_"
    if name == "mongodb_wire":
        return _with_query(service_url("mongodb_wire"), prefix=f"{token}_")
    return (
        f"sqs://jobs?region=us-east-1&endpoint_url={service_url('moto')}&prefix={token}-"
    )


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest,
    service_url: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Backend]:
    """A fresh router on one backend; ``REACTOR_ROUTER_URL`` unset."""
    monkeypatch.delenv("REACTOR_ROUTER_URL", raising=False)
    name = str(request.param)
    url = _url(name, service_url, f"t{uuid.uuid4().hex[:10]}")
    if name == "memory":
        router: Router = _KeptOpen(visibility_timeout=30)
        built = config.router_from_url

        def shared(given: str, **settings: Any) -> Router:
            return router if given == url else built(given, **settings)

        monkeypatch.setattr(config, "router_from_url", shared)
    else:
        router = config.router_from_url(url)
    try:
        yield Backend(name, url, router)
    finally:
        if isinstance(router, _KeptOpen):
            LocalRouter.close(router)
        else:
            router.close()


def _job(**payload: object) -> Job:
    return Job(kind="run", payload={"context_id": f"ctx-{uuid.uuid4().hex[:8]}", **payload})


def _receive(router: Router, timeout: float = 10.0) -> Delivery | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = router.receive(max_jobs=1, wait_seconds=0.2)
        if got:
            return got[0]
    return None


def _dead_letter(backend: Backend, reason: str, job: Job | None = None) -> Job:
    job = job or _job()
    backend.router.enqueue(job)
    delivery = _receive(backend.router)
    assert delivery is not None and delivery.job.id == job.id
    backend.router.dead_letter(delivery, reason)
    return job


def _poison(backend: Backend, body: str | bytes) -> None:
    """Inject ``body`` and let a receive dead-letter it."""
    scheme = "local" if backend.name == "memory" else backend.url.partition(":")[0]
    try:
        load_router_probe(f"{scheme}://", backend.router).inject_raw(body)
    except UnsupportedBody as exc:
        pytest.skip(f"the transport cannot carry the body: {exc}")
    deadline = time.monotonic() + 10
    while not backend.router.dead_letters() and time.monotonic() < deadline:
        assert backend.router.receive(max_jobs=1, wait_seconds=0.2) == []


def _run(*args: str) -> Any:
    return runner.invoke(cli.app, ["dead-letters", *args])


def test_list_shows_each_dead_letter_with_its_id(backend: Backend) -> None:
    first = _dead_letter(backend, "unknown reactor 'ghost'")
    second = _dead_letter(backend, "handler failed on 5 deliveries: boom")
    letters = backend.router.dead_letters()
    out = _run("list", "--router", backend.url)
    assert out.exit_code == 0, out.output + out.stderr
    for letter in letters:
        assert letter.id and letter.id in out.stdout
    assert "unknown reactor 'ghost'" in out.stdout and first.id in out.stdout
    assert out.stdout.index(first.id) < out.stdout.index(second.id)

    out = _run("list", "--router", backend.url, "--json")
    assert out.exit_code == 0, out.output + out.stderr
    listed = json.loads(out.stdout)["dead_letters"]
    assert json.loads(out.stdout)["next_cursor"] is None
    assert [row["id"] for row in listed] == [letter.id for letter in letters]
    assert listed[0]["reason"] == "unknown reactor 'ghost'"
    assert listed[0]["body_encoding"] == "text"
    assert Job.from_json(listed[0]["body"]).id == first.id

    out = _run("list", "--router", backend.url, "--json", "--limit", "1")
    page = json.loads(out.stdout)
    assert [row["id"] for row in page["dead_letters"]] == [letters[0].id]
    assert page["next_cursor"] == letters[0].id
    out = _run("list", "--router", backend.url, "--json", "--cursor", page["next_cursor"])
    assert out.exit_code == 0, out.output + out.stderr
    assert [row["id"] for row in json.loads(out.stdout)["dead_letters"]] == [letters[1].id]


def test_show_prints_the_whole_body_and_its_encoding(backend: Backend) -> None:
    job = _dead_letter(backend, "unknown job kind 'x'", _job(note="caf\u00e9"))
    (letter,) = backend.router.dead_letters()
    out = _run("show", letter.id, "--router", backend.url)
    assert out.exit_code == 0, out.output + out.stderr
    assert f"id:       {letter.id}" in out.stdout
    assert "reason:   unknown job kind 'x'" in out.stdout
    assert "encoding: text" in out.stdout
    assert letter.body in out.stdout and job.id in out.stdout

    out = _run("show", letter.id, "--router", backend.url, "--json")
    assert out.exit_code == 0, out.output + out.stderr
    shown = json.loads(out.stdout)
    assert shown == {"id": letter.id, "at": letter.at, "reason": letter.reason,
                     "body": letter.body, "body_encoding": "text"}


def test_show_gives_a_non_utf8_body_as_base64(backend: Backend) -> None:
    raw = b'{"id": "caf\xe9", "kind": "run", "payload": {}}'
    _poison(backend, raw)
    (letter,) = backend.router.dead_letters()
    out = _run("show", letter.id, "--router", backend.url, "--json")
    assert out.exit_code == 0, out.output + out.stderr
    shown = json.loads(out.stdout)
    assert shown["body_encoding"] == "base64"
    assert base64.b64decode(shown["body"]) == raw
    assert "UTF-8" in shown["reason"]


def test_show_of_an_unknown_id_is_an_error_exit_1(backend: Backend) -> None:
    out = _run("show", "no-such-dead-letter", "--router", backend.url)
    assert out.exit_code == 1
    assert "no dead letter 'no-such-dead-letter'" in out.stderr
    assert out.stdout == ""


def test_requeue_puts_the_job_back_with_a_fresh_delivery_count(backend: Backend) -> None:
    job = _dead_letter(backend, "boom", _job(order=7))
    (letter,) = backend.router.dead_letters()
    out = _run("requeue", letter.id, "no-such-dead-letter", "--router", backend.url)
    assert out.exit_code == 1, out.output + out.stderr  # one of the two ids failed
    assert f"requeued {letter.id} as job {job.id}" in out.stdout
    assert "no dead letter 'no-such-dead-letter'" in out.stderr
    again = _receive(backend.router)
    assert again is not None and again.job.id == job.id
    assert again.delivery_count == 1 and dict(again.job.payload) == dict(job.payload)
    backend.router.ack(again)
    assert backend.router.dead_letters() == []


def test_requeue_of_an_undecodable_body_is_refused_and_kept(backend: Backend) -> None:
    _poison(backend, "{not json")
    (letter,) = backend.router.dead_letters()
    out = _run("requeue", letter.id, "--router", backend.url)
    assert out.exit_code == 1
    assert "refused" in out.stderr and "cannot be requeued" in out.stderr
    assert backend.admin.get_dead_letter(letter.id) == letter
    assert backend.router.receive(max_jobs=1, wait_seconds=0.2) == []


def test_purge_by_id_and_all_with_yes(backend: Backend) -> None:
    for n in range(3):
        _dead_letter(backend, f"reason {n}")
    a, b, c = backend.router.dead_letters()

    out = _run("purge", a.id, "--router", backend.url)
    assert out.exit_code == 0, out.output + out.stderr
    assert "purged 1 dead letter" in out.stdout
    assert backend.router.dead_letters() == [b, c]

    out = _run("purge", a.id, "--router", backend.url)  # gone already
    assert out.exit_code == 1 and "1 of the ids named no dead letter" in out.stderr

    out = _run("purge", "--all", "--router", backend.url)
    assert out.exit_code == 2 and "--yes" in out.stderr
    assert backend.router.dead_letters() == [b, c], "--all without --yes deletes nothing"

    out = _run("purge", "--all", "--yes", "--router", backend.url)
    assert out.exit_code == 0, out.output + out.stderr
    assert "purged 2 dead letters" in out.stdout
    assert backend.router.dead_letters() == []


@pytest.mark.memory
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["purge"], "give the dead-letter ids to purge, or --all --yes"),
        (["purge", "--all", "--yes", "1"], "either --all or dead-letter ids"),
        (["list", "--router", "nosuch://x"], "configuration error"),
        (["list", "--router", "local://", "--cursor", "not-an-id"], "bad dead-letter cursor"),
    ],
)
def test_usage_and_configuration_errors_exit_2(args: list[str], message: str) -> None:
    out = _run(*args)
    assert out.exit_code == 2, out.output + out.stderr
    assert message in out.stderr
    assert "Traceback" not in out.output + out.stderr


class _PlainRouter(LocalRouter):
    """A router without the capability (only :class:`reactor.ports.Router`)."""

    get_dead_letter = None  # type: ignore[assignment]


@pytest.mark.memory
def test_a_router_without_the_capability_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = _PlainRouter()
    assert not isinstance(plain, DeadLetterAdmin)
    monkeypatch.setattr(config, "router_from_url", lambda url, **_: plain)
    out = _run("show", "1", "--router", "local://")
    assert out.exit_code == 2
    assert "DeadLetterAdmin" in out.stderr
    out = _run("list", "--router", "local://")  # listing only needs a Router
    assert out.exit_code == 0 and "no dead letters" in out.stdout


@pytest.mark.memory
def test_the_router_flag_wins_over_the_environment_which_wins_over_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    built = config.router_from_url

    def recording(url: str, **settings: Any) -> Router:
        seen.append(url)
        return built("local://" if url.startswith("local://") else url, **settings)

    monkeypatch.setattr(config, "router_from_url", recording)
    monkeypatch.setenv("REACTOR_ROUTER_URL", "local://?workers=0&from=env")
    out = _run("list", "--router", "local://?workers=0&from=flag")
    assert out.exit_code == 0, out.output + out.stderr
    out = _run("list")
    assert out.exit_code == 0, out.output + out.stderr
    monkeypatch.delenv("REACTOR_ROUTER_URL")
    out = _run("list")
    assert out.exit_code == 0, out.output + out.stderr
    assert "no --router and no REACTOR_ROUTER_URL" in out.stderr
    assert seen == ["local://?workers=0&from=flag", "local://?workers=0&from=env", "local://"]


@pytest.mark.memory
def test_bodies_cannot_drive_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    router = _KeptOpen()
    monkeypatch.setattr(config, "router_from_url", lambda url, **_: router)
    router.enqueue_raw('{"x": "\x1b[2J[bold]hi[/bold]"}')
    assert router.receive(max_jobs=1) == []
    out = _run("show", "1", "--router", "local://")
    assert out.exit_code == 0, out.output + out.stderr
    assert "\x1b" not in out.stdout and "\\x1b[2J[bold]hi[/bold]" in out.stdout
    LocalRouter.close(router)


@pytest.mark.memory
def test_a_sealed_secret_in_a_dead_letter_body_is_shown_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Dead letters are a view like any other: a sealed value reads "[REDACTED]", never its
    ciphertext (docs/security.md, "What each view shows")."""
    router = _KeptOpen()
    monkeypatch.setattr(config, "router_from_url", lambda url, **_: router)
    sealed = {"__t": "reactor.Secret", "v": {"kid": "k1", "ct": "CIPHERTEXT_4242"}}
    router.enqueue_raw(json.dumps({"not": "a job", "card": sealed}))
    assert router.receive(max_jobs=1) == []
    for args in (("show", "1"), ("show", "1", "--json"), ("list",), ("list", "--json")):
        out = _run(*args, "--router", "local://")
        assert out.exit_code == 0, out.output + out.stderr
        assert "CIPHERTEXT_4242" not in out.stdout and "[REDACTED]" in out.stdout, args
    LocalRouter.close(router)


def test_text_output_escapes_newlines_tabs_and_format_characters(backend: Backend) -> None:
    """A reason cannot forge a line, drive the terminal or reorder the text (U+202E, U+200B)."""
    _dead_letter(backend, "boom\nforged line\tx\u202eevil\u200bzw\x1b[2J")
    out = _run("list", "--router", backend.url)
    assert out.exit_code == 0, out.output + out.stderr
    assert "forged line" in out.stdout
    assert not any(line.startswith("forged line") for line in out.stdout.splitlines())
    assert "boom\\nforged line\\tx\\u202eevil\\u200bzw\\x1b[2J" in out.stdout
    for char in ("\u202e", "\u200b", "\x1b", "\t"):
        assert char not in out.stdout


def test_every_dead_letters_command_takes_settings(backend: Backend) -> None:
    out = _run("list", "--router", backend.url, "-s", "visibility_timeout=30")
    assert out.exit_code == 0, out.output + out.stderr
    out = _run("list", "--router", backend.url, "-s", "context_ttl=-1")
    assert out.exit_code == 2, out.output + out.stderr
    assert out.stderr.count("\n") == 1 and "context_ttl" in out.stderr
