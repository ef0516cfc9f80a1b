"""Who may act (docs/dashboard.md, "Security"): the token's rules, the session cookie and its
server-side lifetime, the CSRF token on browser forms, the throttle on failed attempts, the
Host names answered, the fixed message bars, escaped control characters, safe redirects, and
the headers every page carries."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from reactor.config import Runtime
from reactor.dashboard import DashboardServer, create_app, start_dashboard
from reactor.dashboard.security import (
    SESSION_COOKIE,
    Credentials,
    Guard,
    SessionPolicy,
    allowed_hosts,
)
from reactor.errors import ConfigurationError
from tests.dashboard.conftest import TOKEN, Api
from tests.dashboard.reactors import Review, Shop, controls


class FakeClock:
    """A monotonic clock the test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def clocked(clock: FakeClock) -> Iterator[httpx.Client]:
    """A client of a dashboard with actions whose sessions and throttle read ``clock``."""
    app = create_app(None, token=TOKEN, clock=clock,
                     sessions=SessionPolicy(idle_seconds=1800, max_age_seconds=7200))
    with DashboardServer(app, "127.0.0.1", 0).start() as server, httpx.Client(
        base_url=server.url, follow_redirects=False, timeout=60.0
    ) as client:
        yield client


def test_read_only_is_the_default_without_a_token() -> None:
    assert Guard.of(None, None).actions_enabled is False
    assert Guard.of("", None).actions_enabled is False
    assert Guard.of("long-enough-token", None).actions_enabled is True
    assert Guard.of("long-enough-token", True).actions_enabled is False
    with pytest.raises(ConfigurationError, match="needs a token"):
        Guard.of(None, False)
    with pytest.raises(ConfigurationError, match="at least 8"):
        Guard.of("short", None)
    with pytest.raises(ConfigurationError):
        Guard.of("has a space", None)


def test_a_session_is_signed_with_the_token() -> None:
    guard = Guard.of("long-enough-token", None)
    assert guard.open_session("wrong-token") is None
    session = guard.open_session("long-enough-token")
    assert session is not None and guard.signed_in(session)
    csrf = guard.csrf_token(session)
    assert csrf is not None
    guard.check(Credentials(session=session, csrf=csrf))
    other = Guard.of("another-long-token", None)
    assert not other.signed_in(session) and other.csrf_token(session) is None
    nonce, _signature = session.split(".")
    assert not guard.signed_in(f"{nonce}.{'0' * 64}")


def _login(client: httpx.Client, token: str, next_path: str = "/runs") -> httpx.Response:
    return client.post("/login", data={"token": token, "next": next_path})


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found, "the page carries no CSRF token"
    return found.group(1)


def test_a_browser_acts_with_its_session_and_csrf_token(memory: Runtime, api: Api) -> None:
    controls["ship_fails"] = True
    failed = Shop.run(order_id="o-1", items=["a"], card_token="secret-token-value")
    controls["ship_fails"] = False
    client = api.client

    assert _login(client, "not-the-token").status_code == 401
    signed = _login(client, TOKEN, f"/runs/{failed.run_id}")
    assert signed.status_code == 303
    assert signed.headers["location"].startswith(f"/runs/{failed.run_id}")
    cookie = signed.headers["set-cookie"]
    assert SESSION_COOKIE in cookie and "HttpOnly" in cookie
    assert "samesite=strict" in cookie.lower()

    page = client.get(f"/runs/{failed.run_id}")
    assert page.status_code == 200 and "secret-token-value" not in page.text
    csrf = _csrf(page.text)
    action = f"/runs/{failed.run_id}/actions/retry"
    forged = client.post(action, data={"csrf_token": "0" * 64})
    assert forged.status_code == 403 and forged.json()["error"] == "bad_csrf"
    assert client.post(action).status_code == 403
    done = client.post(action, data={"csrf_token": csrf})
    assert done.status_code == 303
    location = done.headers["location"]
    assert location.startswith("/runs/") and failed.run_id not in location.split("?")[0]
    assert "notice=retried" in location
    new_page = client.get(location)
    assert f'href="/runs/{failed.run_id}"' in new_page.text  # "retried from"

    client.post("/logout", data={"csrf_token": csrf})
    client.cookies.clear()
    assert client.post(action, data={"csrf_token": csrf}).status_code == 401


def test_login_redirects_stay_on_the_dashboard(memory: Runtime, api: Api) -> None:
    for target in ("//evil.example/x", "https://evil.example/", "\\\\evil"):
        response = _login(api.client, TOKEN, target)
        assert response.headers["location"].split("?")[0] == "/runs"


def test_a_read_only_dashboard_refuses_a_login(memory: Runtime, read_only_api: Api) -> None:
    response = _login(read_only_api.client, TOKEN)
    assert response.status_code == 401 and "read-only" in response.text
    page = read_only_api.client.get("/runs")
    assert page.status_code == 200 and 'id="mode">read-only' in page.text


def test_pages_carry_protective_headers(memory: Runtime, api: Api) -> None:
    page = api.client.get("/runs")
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert 'src="/static/htmx.min.js"' in page.text  # vendored: nothing from a CDN
    assert "https://" not in page.text
    script = api.client.get("/static/htmx.min.js")
    assert script.status_code == 200 and "htmx" in script.text[:200]


def test_the_resume_form_takes_a_json_payload(memory: Runtime, api: Api) -> None:
    paused = Review.run(order_id="r-form")
    client = api.client
    assert _login(client, TOKEN, f"/runs/{paused.run_id}").status_code == 303
    page = client.get(f"/runs/{paused.run_id}")
    assert 'id="resume-form"' in page.text
    csrf = _csrf(page.text)
    action = f"/runs/{paused.run_id}/actions/resume"
    bad = client.post(action, data={"csrf_token": csrf, "payload": "{not json"})
    assert bad.status_code == 400 and 'id="problem">resume: ' in bad.text  # the server's text
    done = client.post(action, data={"csrf_token": csrf, "payload": '{"approved": true}',
                                     "step": "approval"})
    assert done.status_code == 303
    assert "completed" in client.get(done.headers["location"]).text


# ---- sessions end ------------------------------------------------------------------------------


def _signed_in(client: httpx.Client, run_id: str) -> str:
    """Sign ``client`` in; returns the CSRF token of the run page of ``run_id``."""
    assert _login(client, TOKEN, f"/runs/{run_id}").status_code == 303
    return _csrf(client.get(f"/runs/{run_id}").text)


def test_logout_ends_the_session_in_the_server(memory: Runtime, api: Api) -> None:
    paused = Review.run(order_id="logout")
    client = api.client
    csrf = _signed_in(client, paused.run_id)
    cookie = client.cookies[SESSION_COOKIE]
    assert client.post("/logout").status_code == 403  # a POST with the CSRF token only
    assert client.get(f"/runs/{paused.run_id}").text.count("sign out") == 1  # still signed in
    assert client.post("/logout", data={"csrf_token": csrf}).status_code == 303

    replay = httpx.Client(base_url=api.server.url, cookies={SESSION_COOKIE: cookie})
    with replay:
        refused = replay.post(f"/runs/{paused.run_id}/actions/cancel",
                              data={"csrf_token": csrf})
        assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
        assert "sign out" not in replay.get(f"/runs/{paused.run_id}").text
        page = f"{api.server.url}/runs/{paused.run_id}"
        browser = replay.post(f"/runs/{paused.run_id}/actions/cancel",
                              data={"csrf_token": csrf},
                              headers={"accept": "text/html", "referer": page})
        assert browser.status_code == 303  # a browser is sent to sign in again
        login = browser.headers["location"]
        assert login == (f"/login?next=%2Fruns%2F{paused.run_id}&problem=session_ended")
        assert "the session ended" in replay.get(login).text


def test_sessions_expire_when_idle_and_at_their_maximum_age(
    memory: Runtime, clock: FakeClock, clocked: httpx.Client
) -> None:
    paused = Review.run(order_id="expiry")
    csrf = _signed_in(clocked, paused.run_id)
    clock.advance(1799)  # still within the idle time: and using it restarts it
    assert 'id="sign-out"' in clocked.get(f"/runs/{paused.run_id}").text
    clock.advance(1801)
    refused = clocked.post(f"/runs/{paused.run_id}/actions/cancel", data={"csrf_token": csrf})
    assert refused.status_code == 401

    clocked.cookies.clear()
    _signed_in(clocked, paused.run_id)
    for _ in range(5):  # used every 20 minutes: never idle, still ends after 2 hours
        clock.advance(1200)
        assert 'id="sign-out"' in clocked.get("/runs").text
    clock.advance(1200)
    assert 'id="sign-out"' not in clocked.get("/runs").text


def test_a_new_token_or_a_restart_ends_every_session(memory: Runtime) -> None:
    with start_dashboard(None, token=TOKEN) as first, httpx.Client(base_url=first.url) as c:
        assert _login(c, TOKEN).status_code == 303
        cookie = c.cookies[SESSION_COOKIE]
        assert 'id="sign-out"' in c.get("/runs").text
    for token in (TOKEN, "a-rotated-token"):
        with start_dashboard(None, token=token) as again, httpx.Client(
            base_url=again.url, cookies={SESSION_COOKIE: cookie}
        ) as replay:
            assert 'id="sign-out"' not in replay.get("/runs").text
            assert replay.post("/api/runs/x/retry").status_code == 401


def test_session_lifetimes_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="idle_seconds"):
        SessionPolicy(idle_seconds=0)
    with pytest.raises(ConfigurationError, match="max_age_seconds"):
        SessionPolicy(max_age_seconds=float("nan"))


# ---- throttle ---------------------------------------------------------------------------------


def test_failed_logins_are_throttled_per_address(
    memory: Runtime, clock: FakeClock, clocked: httpx.Client
) -> None:
    for _ in range(5):
        assert _login(clocked, "not-the-token").status_code == 401
    refused = _login(clocked, TOKEN)  # even the right token, while refused
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "60"
    assert refused.json() == {"error": "too_many_attempts", "retry_after": 60,
                              "message": refused.json()["message"]}
    bearer = clocked.post("/api/runs/x/retry", headers={"authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 429
    clock.advance(45)
    assert _login(clocked, TOKEN).headers["retry-after"] == "15"
    clock.advance(15)
    assert _login(clocked, TOKEN).status_code == 303


def test_wrong_bearer_tokens_are_throttled(
    memory: Runtime, clock: FakeClock, clocked: httpx.Client
) -> None:
    wrong = {"authorization": "Bearer not-the-token"}
    for _ in range(5):
        answer = clocked.post("/api/runs/x/retry", headers=wrong)
        assert answer.status_code == 401 and answer.json()["error"] == "bad_token"
    assert clocked.post("/api/runs/x/retry", headers=wrong).status_code == 429
    clock.advance(60)
    missing = clocked.post("/api/runs/x/retry", headers={"authorization": f"Bearer {TOKEN}"})
    assert missing.status_code == 404  # through: the run does not exist


# ---- Host names ---------------------------------------------------------------------------------


def test_a_rebound_host_name_is_refused(memory: Runtime, api: Api) -> None:
    port = api.server.port
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", ""):
        answer = api.client.get("/api/runs", headers={"host": host})
        assert answer.status_code == 400, host
        assert answer.json()["error"] == "bad_host"
    page = api.client.get("/runs", headers={"host": "rebound.example", "accept": "text/html"})
    assert page.status_code == 400 and "bad_host" in page.text
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST"):
        assert api.client.get("/api/runs", headers={"host": host}).status_code == 200, host


def test_configured_host_names_are_answered(memory: Runtime) -> None:
    server = start_dashboard(None, hosts=["dash.example.com", "*.ops.example"])
    with server, httpx.Client(base_url=server.url) as client:
        for host in ("dash.example.com", "a.ops.example:8800", "localhost"):
            assert client.get("/api/runs", headers={"host": host}).status_code == 200
        assert client.get("/api/runs", headers={"host": "x.example"}).status_code == 400
    assert allowed_hosts("10.1.2.3", ["dash.example.com"]) == ["10.1.2.3", "dash.example.com"]
    assert allowed_hosts("::1") == ["127.0.0.1", "localhost", "[::1]"]
    assert "localhost" in allowed_hosts("0.0.0.0")
    with pytest.raises(ConfigurationError, match="allowed host"):
        allowed_hosts(None, ["dash.example.com:8800/x"])


# ---- what the message bars and the values show ---------------------------------------------------


def test_message_bars_show_only_fixed_texts(memory: Runtime, api: Api) -> None:
    spoof = "Your session expired: sign in at https://evil.example/login"
    for name in ("notice", "problem"):
        page = api.client.get("/runs", params={name: spoof})
        assert page.status_code == 200
        assert "evil.example" not in page.text and f'id="{name}"' not in page.text
    known = api.client.get("/runs", params={"notice": "signed_out"})
    assert '<p class="notice" id="notice">signed out</p>' in known.text


def test_control_and_bidi_characters_are_escaped_on_the_pages(memory: Runtime, api: Api) -> None:
    spoofed = "order-\u202etxt.exe\u200b\x1b[31m"
    done = Shop.run(order_id=spoofed, items=["a"], card_token="card-secret",
                    idempotency_key=f"key-{spoofed}")
    page = api.client.get(f"/runs/{done.run_id}")
    assert page.status_code == 200
    for raw in ("\u202e", "\u200b", "\x1b"):
        assert raw not in page.text
    assert "key-order-\\u202etxt.exe\\u200b\\x1b[31m" in page.text  # plain: the CLI's rule
    assert "order-\\u202etxt.exe\\u200b\\u001b[31m" in page.text  # inside JSON: JSON's syntax
    api_view = api.json(f"/api/runs/{done.run_id}")  # the API keeps the value as stored
    assert api_view["links"]["idempotency_key"] == f"key-{spoofed}"


def test_a_finished_runs_map_structure_is_not_pending(memory: Runtime, api: Api) -> None:
    done = Shop.run(order_id="map-structure", items=["a", "b"], card_token="card-secret")
    page = api.client.get(f"/runs/{done.run_id}")
    assert 'data-state="pending"' not in page.text
    assert 'data-step="reserve" data-state="completed"' in page.text
    assert 'data-state="element"' in page.text  # the element reactor's steps


def test_the_page_links_an_icon_that_exists(memory: Runtime, api: Api) -> None:
    page = api.client.get("/runs")
    found = re.search(r'<link rel="icon" href="([^"]+)"', page.text)
    assert found is not None
    assert api.client.get(found.group(1)).status_code == 200
