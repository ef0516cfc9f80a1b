"""The dashboard in a real browser (docs/dashboard.md, "Pages"): Playwright drives Debian's
``/usr/bin/chromium`` (``scripts/test`` installs it with apt-get; no browser is ever
downloaded) against a dashboard served from this process on the demo's runs (the
order-fulfilment example) plus a run blocked on a lock that another run holds, and the
demo's settlement schedule.

Every wait is on the page's DOM (``expect``): the live parts refresh through htmx polling, and
the tests wait for what they expect to appear, never for a fixed time. Without chromium the
tests fail with the reason; they are never skipped.

Screenshots go to a temporary directory, or to ``$REACTOR_SCREENSHOTS_DIR`` when set (that is
how the pictures in docs/img/ are made: ``REACTOR_SCREENSHOTS_DIR=docs/img``).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from examples.order_fulfilment.run import load_orders, run_demo
from examples.order_fulfilment.schedules import PERIOD_SECONDS, SETTLEMENT
from examples.order_fulfilment.services import SERVICES, Services
from reactor import Worker, config
from reactor.config import Runtime
from reactor.dashboard import DashboardServer, start_dashboard
from reactor.dashboard.security import SESSION_COOKIE
from reactor.memory import LocalRouter, MemoryStorage
from reactor.schedules import Scheduler, register, unregister
from tests.dashboard.conftest import TOKEN
from tests.dashboard.reactors import HOLDING, HoldPick, Picker, Review, Shop

CHROMIUM = Path("/usr/bin/chromium")
#: Orders of the demo's dataset to run: the first 70 hold declined cards, undeliverable
#: addresses and the carrier outage of orders 61-64.
DEMO_ORDERS = 70


def _launch() -> tuple[Any, Any]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"the browser tests need Chromium at {CHROMIUM}: run scripts/test (it installs the "
            "Debian package 'chromium' with apt-get) or `apt-get install chromium`",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright  # deferred: only these tests need it

    driver = sync_playwright().start()
    browser = driver.chromium.launch(executable_path=str(CHROMIUM),
                                     args=["--no-sandbox", "--disable-gpu"])
    return driver, browser


@dataclass
class Scene:
    """What the browser tests look at."""

    runtime: Runtime
    server: DashboardServer
    failed_order_run: str
    failed_reactor: str
    blocked_run: str
    holder_run: str
    shots: Path


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    runtime = config.configure(storage=MemoryStorage(), router=LocalRouter(),
                               lock_snooze_base_delay=0.0, lock_snooze_jitter=0.0,
                               allow_plaintext_secrets=True)
    services = Services.create()
    report = run_demo(load_orders(limit=DEMO_ORDERS), services, real_sleep=False)
    SERVICES.install(services)  # a retry from the page runs against the same services
    failed = [o for o in report.outcomes if o.status == "failed" and o.run_id]
    assert failed, "the demo's first orders should hold failures"
    pick = next((o for o in failed if o.reason == "carrier_outage"), failed[0])
    assert pick.run_id is not None
    failed_reactor = runtime.storage.contexts.load(pick.run_id).reactor  # type: ignore[union-attr]

    HOLDING.reset()
    holding: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: holding.update(result=HoldPick.run(sku="X")))
    thread.start()
    assert HOLDING.entered.wait(30)
    lock = runtime.storage.locks.info("sku:X")
    assert lock is not None
    blocked = Picker.run(sku="X", card="4111-SECRET-CARD")
    assert Worker(runtime).run_pending(max_jobs=1) == 1  # parks on the held lock

    server = start_dashboard(runtime, token=TOKEN)
    shots = Path(os.environ.get("REACTOR_SCREENSHOTS_DIR") or tmp_path_factory.mktemp("shots"))
    shots.mkdir(parents=True, exist_ok=True)
    try:
        yield Scene(runtime, server, pick.run_id, failed_reactor, str(blocked.run_id),
                    lock.owner, shots)
    finally:
        HOLDING.release.set()
        thread.join(30)
        server.stop()
        SERVICES.install(None)
        config.reset()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver, launched = _launch()
    yield launched
    launched.close()
    driver.stop()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(20_000)
    yield opened
    context.close()


def test_the_runs_list_filters_failed_runs_and_stays_live(scene: Scene, page: Any) -> None:
    from playwright.sync_api import expect  # deferred: only these tests need it

    page.goto(f"{scene.server.url}/runs")
    expect(page.locator("#runs-table")).to_be_visible()
    expect(page.locator("tr.run-row").first).to_be_visible()
    page.screenshot(path=str(scene.shots / "dashboard-runs.png"))

    page.select_option("#filter-status", "failed")
    page.fill("#filter-reactor", scene.failed_reactor)
    page.click("#apply-filters")
    expect(page).to_have_url(re.compile(r"status=failed"))
    rows = page.locator("tr.run-row")
    expect(rows.first).to_be_visible()
    expect(page.locator("tr.run-row:not([data-status='failed'])")).to_have_count(0)
    expect(page.locator(f"tr.run-row[data-run-id='{scene.failed_order_run}']")).to_be_visible()
    page.screenshot(path=str(scene.shots / "dashboard-runs-failed.png"))

    page.goto(f"{scene.server.url}/runs")  # a new run appears without a reload (htmx)
    expect(page.locator("tr.run-row").first).to_be_visible()
    fresh = Review.run(order_id="fresh")
    expect(page.locator(f"tr.run-row[data-run-id='{fresh.run_id}']")).to_be_visible()


def test_a_failed_order_shows_its_graph_and_its_rollback(scene: Scene, page: Any) -> None:
    from playwright.sync_api import expect  # deferred: only these tests need it

    page.goto(f"{scene.server.url}/runs?status=failed")
    page.click(f"tr.run-row[data-run-id='{scene.failed_order_run}'] a.run-link")
    expect(page.locator("#run-id")).to_have_text(scene.failed_order_run)
    expect(page.locator("#run-status")).to_have_text("failed")
    graph = page.locator("#graph svg.graph").first
    expect(graph.locator("g.node[data-state='failed']")).to_have_count(1)
    expect(graph.locator("g.node[data-state='undone']").first).to_be_visible()
    expect(page.locator("#timeline li[data-type='failed']").first).to_be_visible()
    rollback = page.locator("#timeline li.rollback")
    expect(rollback.first).to_be_visible()
    expect(page.locator("#failure")).to_contain_text("rolled back completely")
    expect(page.locator("#inputs")).to_contain_text("[REDACTED]")
    page.screenshot(path=str(scene.shots / "dashboard-run-failed.png"), full_page=True)


def test_the_coordination_panel_of_a_run_blocked_on_a_lock(scene: Scene, page: Any) -> None:
    from playwright.sync_api import expect  # deferred: only these tests need it

    page.goto(f"{scene.server.url}/runs/{scene.blocked_run}")
    panel = page.locator("#coordination")
    lock = panel.locator("tr.coord-row[data-step='pick'][data-primitive='lock']")
    expect(lock).to_contain_text("sku:X")
    expect(lock.locator("a.holder")).to_have_text(scene.holder_run)
    expect(lock).to_contain_text("waiting here")
    expect(panel.locator("tr.coord-row[data-step='pick'][data-primitive='semaphore']")
           ).to_contain_text("pickers")
    expect(panel.locator("tr.coord-row[data-step='pack'][data-state='pending']")
           ).to_have_count(2)
    expect(panel.locator("p.waiting")).to_contain_text("waiting on lock sku:X")
    expect(page.locator("#graph g.node[data-step='pick']")).to_have_attribute(
        "data-state", "waiting")
    panel.screenshot(path=str(scene.shots / "dashboard-coordination.png"))
    page.screenshot(path=str(scene.shots / "dashboard-run-blocked.png"), full_page=True)

    lock.locator("a.holder").click()  # the holder is a run of its own
    expect(page.locator("#run-id")).to_have_text(scene.holder_run)


def test_retry_from_the_page_opens_the_new_run(scene: Scene, page: Any) -> None:
    from playwright.sync_api import expect  # deferred: only these tests need it

    old = scene.failed_order_run
    page.goto(f"{scene.server.url}/runs/{old}")
    expect(page.locator("#action-retry")).to_be_disabled()  # not signed in yet
    page.goto(f"{scene.server.url}/login?next=/runs/{old}")
    page.fill("#token", TOKEN)
    page.click("#sign-in")
    expect(page.locator("#notice")).to_have_text("signed in")
    expect(page.locator("#run-id")).to_have_text(old)
    page.click("#action-retry")
    expect(page.locator("#notice")).to_contain_text("retry: new run")
    expect(page.locator("#retried-from a")).to_have_text(old)
    new_id = page.locator("#run-id").inner_text()
    assert new_id != old
    expect(page.locator("#run-status")).not_to_have_text("pending")
    page.screenshot(path=str(scene.shots / "dashboard-retry.png"), full_page=True)
    page.goto(f"{scene.server.url}/runs/{old}")
    expect(page.locator("#retries a")).to_have_text(new_id)


def test_suspend_and_unsuspend_from_the_page(scene: Scene, page: Any) -> None:
    from playwright.sync_api import expect  # deferred: only these tests need it

    paused = Review.run(order_id="browser-suspend")
    run_id = str(paused.run_id)
    page.goto(f"{scene.server.url}/runs/{run_id}")
    expect(page.locator("#action-suspend")).to_be_disabled()  # not signed in yet
    page.goto(f"{scene.server.url}/login?next=/runs/{run_id}")
    page.fill("#token", TOKEN)
    page.click("#sign-in")
    expect(page.locator("#run-id")).to_have_text(run_id)
    page.fill("#suspend-reason", "carrier incident")
    page.fill("#suspend-by", "alice")
    page.click("#action-suspend")
    expect(page.locator("#notice")).to_contain_text("suspend: requested")
    expect(page.locator("#run-status")).to_have_text("suspended")
    expect(page.locator("#suspension")).to_contain_text("carrier incident")
    expect(page.locator("#suspension")).to_contain_text("alice")
    page.screenshot(path=str(scene.shots / "dashboard-suspended.png"), full_page=True)
    page.click("#action-unsuspend")
    expect(page.locator("#notice")).to_contain_text("unsuspend: the run goes on")
    expect(page.locator("#run-status")).to_have_text("paused")  # back at its interrupt
    expect(page.locator("#suspension")).to_have_count(0)
    expect(page.locator("#action-suspend")).to_be_enabled()


def test_a_blocked_run_goes_on_live_once_the_lock_is_free(scene: Scene, page: Any) -> None:
    from playwright.sync_api import expect  # deferred: only these tests need it

    page.goto(f"{scene.server.url}/runs/{scene.blocked_run}")
    expect(page.locator("#run-status")).to_have_text("running")
    HOLDING.release.set()  # the holder finishes and releases sku:X
    Worker(scene.runtime).run_pending()
    # the page was not reloaded: htmx polling brings the new status and the rows
    expect(page.locator("#run-status")).to_have_text("failed")
    expect(page.locator("#coordination tr.coord-row[data-step='notify']")).to_contain_text(
        "tests-dashboard-unregistered")


def test_a_link_cannot_put_words_in_the_message_bars(scene: Scene, page: Any) -> None:
    from playwright.sync_api import expect  # deferred: only these tests need it

    failures: list[str] = []
    page.on("response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 400
            else None)
    spoof = "Session expired: sign in again at https://evil.example/login"
    page.goto(f"{scene.server.url}/runs?notice={spoof}&problem={spoof}")
    expect(page.locator("#runs-table")).to_be_visible()
    expect(page.locator("#notice")).to_have_count(0)
    expect(page.locator("#problem")).to_have_count(0)
    assert "evil.example" not in page.content()
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon is not None and page.request.get(f"{scene.server.url}{icon}").ok
    assert failures == []  # no favicon 404 either


def test_a_bidi_override_in_a_run_is_shown_escaped(scene: Scene, page: Any) -> None:
    from playwright.sync_api import expect  # deferred: only these tests need it

    spoofed = "order-\u202etxt.exe"
    done = Shop.run(order_id=spoofed, items=["a", "b"], card_token="card-secret",
                    idempotency_key=f"key-{spoofed}")
    page.goto(f"{scene.server.url}/runs/{done.run_id}")
    expect(page.locator("#run-status")).to_have_text("completed")
    key = page.locator("dd", has_text="key-order-")
    expect(key).to_have_text("key-order-\\u202etxt.exe")
    assert "\u202e" not in page.locator("main").inner_text()
    graph = page.locator("#graph")  # a finished run: its map's element structure is no state
    expect(graph.locator("g.node[data-step='reserve']").first).to_have_attribute(
        "data-state", "completed")
    expect(graph.locator("g.node[data-state='element']").first).to_be_visible()
    expect(graph.locator("g.node[data-state='pending']")).to_have_count(0)


def test_signing_out_ends_the_session(scene: Scene, page: Any) -> None:
    from playwright.sync_api import expect  # deferred: only these tests need it

    page.goto(f"{scene.server.url}/login?next=/runs")
    page.fill("#token", TOKEN)
    page.click("#sign-in")
    expect(page.locator("#notice")).to_have_text("signed in")
    cookie = next(c for c in page.context.cookies() if c["name"] == SESSION_COOKIE)
    page.click("#sign-out")
    expect(page.locator("#notice")).to_have_text("signed out")
    expect(page.locator("#login-link")).to_be_visible()
    page.context.add_cookies([cookie])  # the old cookie, replayed
    page.goto(f"{scene.server.url}/runs")
    expect(page.locator("#login-link")).to_be_visible()
    expect(page.locator("#sign-out")).to_have_count(0)


def test_a_name_rebound_to_the_dashboard_reads_nothing(scene: Scene, browser: Any) -> None:
    # a second chromium that resolves rebound.test to 127.0.0.1, as after a DNS rebinding
    rebinding = browser.browser_type.launch(
        executable_path=str(CHROMIUM),
        args=["--no-sandbox", "--disable-gpu",
              "--host-resolver-rules=MAP rebound.test 127.0.0.1"])
    try:
        page = rebinding.new_page()
        rebound = page.goto(f"http://rebound.test:{scene.server.port}/runs")
        assert rebound is not None and rebound.status == 400
        assert "bad_host" in page.content() and scene.failed_order_run not in page.content()
        api = page.goto(f"http://rebound.test:{scene.server.port}/api/runs")
        assert api is not None and api.status == 400 and api.json()["error"] == "bad_host"
        own = page.goto(f"http://localhost:{scene.server.port}/runs")
        assert own is not None and own.status == 200
    finally:
        rebinding.close()


def test_the_schedules_page_lists_the_demo_schedule_and_pauses_it(
    scene: Scene, page: Any
) -> None:
    from playwright.sync_api import expect  # deferred: only these tests need it

    register(SETTLEMENT)  # the demo's schedule, as ./scripts/demo --dashboard declares it
    try:
        scheduler = Scheduler(scene.runtime, schedules=[SETTLEMENT])
        scheduler.tick(scene.runtime.clock.now() - PERIOD_SECONDS)  # first look a period back
        (outcome,) = scheduler.tick()  # the tick since is due: its run is started
        page.goto(f"{scene.server.url}/runs")
        page.click("#nav-schedules")
        row = page.locator("tr.schedule-row[data-name='settlement']")
        expect(row).to_have_attribute("data-paused", "false")
        expect(row.locator(".schedule-spec")).to_have_text("every 60 s")
        expect(row.locator(".schedule-last-run a")).to_have_text(str(outcome.run_id))
        expect(row.locator(".schedule-next-tick")).not_to_have_text("—")
        expect(row.locator("button.schedule-pause")).to_be_disabled()  # not signed in yet
        page.screenshot(path=str(scene.shots / "dashboard-schedules.png"), full_page=True)

        page.goto(f"{scene.server.url}/login?next=/schedules")
        page.fill("#token", TOKEN)
        page.click("#sign-in")
        expect(row.locator("button.schedule-pause")).to_be_enabled()
        row.locator("button.schedule-pause").click()
        expect(page.locator("#notice")).to_contain_text("pause: the schedule decides no tick")
        expect(row).to_have_attribute("data-paused", "true")
        expect(row.locator(".schedule-next-tick")).to_have_text("paused")
        row.locator("button.schedule-resume").click()
        expect(page.locator("#notice")).to_contain_text("resume: the schedule ticks again")
        expect(row).to_have_attribute("data-paused", "false")
        row.locator(".schedule-last-run a").click()  # the last run's own page
        expect(page.locator("#run-id")).to_have_text(str(outcome.run_id))
    finally:
        unregister(SETTLEMENT.name)
