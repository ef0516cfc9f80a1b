"""Who may act (docs/dashboard.md, "Security"): the token's rules, the session cookie, the
CSRF token on browser forms, safe redirects, and the headers every page carries."""

from __future__ import annotations

import re

import httpx
import pytest

from reactor.config import Runtime
from reactor.dashboard.security import SESSION_COOKIE, Credentials, Guard
from reactor.errors import ConfigurationError
from tests.dashboard.conftest import TOKEN, Api
from tests.dashboard.reactors import Review, Shop, controls


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
    assert "notice=retry" in location
    new_page = client.get(location)
    assert f'href="/runs/{failed.run_id}"' in new_page.text  # "retried from"

    client.post("/logout")
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
    assert bad.status_code == 303 and "problem=resume" in bad.headers["location"]
    done = client.post(action, data={"csrf_token": csrf, "payload": '{"approved": true}',
                                     "step": "approval"})
    assert done.status_code == 303
    assert "completed" in client.get(done.headers["location"]).text
