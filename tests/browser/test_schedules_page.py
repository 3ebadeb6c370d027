"""The Schedules page in a real headless Chromium (see conftest.py): the nav link, the
columns of `durable schedules`, Pause then Resume (each asked first, the row following
the schedule), Trigger, the last tick's run linking to its page, and a read-only
dashboard offering none of the buttons. The dashboard's worker fires the ticks."""

from __future__ import annotations

import dataclasses
import threading
from urllib.parse import quote

import pytest

from durable.runtime import schedules
from tests.browser.conftest import Dashboard, Page, eventually
from tests.integration import schedule_workflows as flows

pytestmark = pytest.mark.browser

#: the chip colour app.css gives a paused run, and a paused schedule (--paused).
PAUSED = "rgb(196, 181, 253)"


def make(dashboard: Dashboard, schedule_id: str, every: float = 3600) -> str:
    spec = schedules.Spec.make(every=every)
    schedules.store(
        dashboard.engine, flows.sync_customer, spec, schedule_id=schedule_id, args=["c-1"]
    )
    return schedule_id


def paused(dashboard: Dashboard, schedule_id: str) -> bool:
    stored = dashboard.engine.backend.get_schedule(schedule_id)
    assert stored is not None
    return stored.paused


def row(page: Page, schedule_id: str) -> str:
    """The CSS selector of the schedule's row, once the page shows it."""
    selector = f'#schedules-body tr[data-key="{schedule_id}"]'
    page.wait_js(f"document.querySelector('{selector}') !== null", f"the row of {schedule_id}")
    return selector


def cells(page: Page, selector: str) -> list[str]:
    return list(
        page.js(
            "return Array.from(document.querySelector(arguments[0]).cells)"
            ".slice(0, 6).map(td => td.textContent);",
            selector,
        )
    )


def buttons(page: Page, selector: str) -> dict[str, bool]:
    return {
        action: bool(page.displayed(f"{selector} button[data-action={action}]"))
        for action in ("pause", "resume", "trigger")
    }


def click(page: Page, selector: str, action: str) -> str:
    """Click the row's button, confirm the dialog; the question it asked."""
    page.click(f"{selector} button[data-action={action}]")
    page.wait_js("document.querySelector('#confirm').open", "the confirmation dialog")
    question = page.text("#confirm-text")
    assert not page.displayed("#confirm-actor")  # nothing is recorded per actor
    page.confirm()
    return question


def page_at_schedules(page: Page) -> Page:
    page.open("#/schedules")
    return page


def state_is(page: Page, selector: str, state: str) -> None:
    page.wait_js(
        f"document.querySelector('{selector}').getAttribute('data-state') === '{state}'", state
    )


def test_the_nav_link_opens_the_schedules_page(page: Page, dashboard: Dashboard) -> None:
    make(dashboard, "page-nav")
    page.open("#/runs")
    assert page.attribute("#nav-runs", "aria-current") == "page"
    page.click("#nav-schedules")
    selector = row(page, "page-nav")
    assert page.driver.current_url.endswith("#/schedules")
    assert page.attribute("#nav-schedules", "aria-current") == "page"
    assert page.attribute("#nav-runs", "aria-current") is None
    headers = page.js(
        "return Array.from(document.querySelectorAll('#schedules-table th'))"
        ".map(th => th.textContent);"
    )
    assert headers == ["Id", "Workflow", "When", "Next", "Last", "Last run", "Actions"]
    assert page.displayed(selector)


def test_pause_then_resume_a_schedule(page: Page, dashboard: Dashboard) -> None:
    selector = row(page_at_schedules(page), make(dashboard, "page-pause"))
    name, workflow, when, following, last, last_run = cells(page, selector)
    assert (name, workflow, when) == ("page-pause", flows.sync_customer.name, "every 1h")
    assert following not in ("", "—", "paused") and (last, last_run) == ("—", "—")
    assert buttons(page, selector) == {"pause": True, "resume": False, "trigger": True}

    question = click(page, selector, "pause")
    assert question.startswith("Pause schedule page-pause?")
    eventually(lambda: paused(dashboard, "page-pause"), "the schedule to be paused")
    state_is(page, selector, "paused")
    assert cells(page, selector)[3] == "paused"
    chip = page.find(f"{selector} td:nth-child(4) span")
    assert page.js("return getComputedStyle(arguments[0]).backgroundColor;", chip) == PAUSED
    assert buttons(page, selector) == {"pause": False, "resume": True, "trigger": True}
    assert "Schedule page-pause paused." in page.text("#notice")

    click(page, selector, "resume")
    eventually(lambda: not paused(dashboard, "page-pause"), "the schedule to be resumed")
    state_is(page, selector, "active")
    assert cells(page, selector)[3] not in ("paused", "—")
    assert page.attribute(f"{selector} td:nth-child(4) span", "title") is not None
    assert buttons(page, selector) == {"pause": True, "resume": False, "trigger": True}


def test_trigger_starts_a_run(page: Page, dashboard: Dashboard) -> None:
    selector = row(page_at_schedules(page), make(dashboard, "page-trigger"))
    click(page, selector, "trigger")
    notice = page.wait_js(
        "document.querySelector('#notice').textContent.startsWith('Started run ')"
        " && document.querySelector('#notice').textContent",
        "the started run's notice",
    )
    run_id = notice.removeprefix("Started run ").removesuffix(".")
    assert run_id.startswith("page-trigger@") and run_id.endswith("-manual")
    dashboard.wait_status(run_id, "completed")


def fire(dashboard: Dashboard, schedule_id: str) -> str:
    """Make the schedule due now; the run its tick started, once completed."""
    stored = dashboard.engine.backend.get_schedule(schedule_id)
    assert stored is not None
    due = dataclasses.replace(stored, next_fire_at=dashboard.engine.backend.now() - 1)
    dashboard.engine.backend.put_schedule(due)

    def fired() -> str | None:
        now = dashboard.engine.backend.get_schedule(schedule_id)
        return None if now is None else now.last_run_id

    run_id: str = eventually(fired, "the worker to fire the tick")
    dashboard.wait_status(run_id, "completed")
    return run_id


def test_the_last_tick_links_to_its_run(page: Page, dashboard: Dashboard) -> None:
    """A tick the worker fires shows as LAST and LAST RUN (with the run's status chip);
    the link opens the run's page."""
    run_id = fire(dashboard, make(dashboard, "page-fired"))
    selector = row(page_at_schedules(page), "page-fired")
    link = f"{selector} td:nth-child(6) a"
    page.wait_js(
        f"document.querySelector('{selector} td:nth-child(6) .chip') !== null &&"
        f" document.querySelector('{selector} td:nth-child(6) .chip').textContent"
        " === 'completed'",
        "the last run's status",
    )
    assert page.text(link) == run_id
    assert cells(page, selector)[4] not in ("", "—")
    page.click(link)
    page.wait_js(
        "document.querySelector('#run-id') !== null &&"
        f" document.querySelector('#run-id').textContent === {run_id!r}",
        "the run's page",
    )
    assert page.driver.current_url.endswith("#/runs/" + quote(run_id, safe=""))
    page.wait_js("document.querySelector('#run-status').textContent === 'completed'", "its status")


def test_a_focused_last_run_keeps_the_focus_when_the_row_changes(
    page: Page, dashboard: Dashboard
) -> None:
    """The schedule paused elsewhere while its last run's link has the keyboard focus:
    the row is redrawn paused, and the focus stays on that link."""
    run_id = fire(dashboard, make(dashboard, "page-focused"))
    selector = row(page_at_schedules(page), "page-focused")
    link = f"{selector} td:nth-child(6) a"
    page.wait_js(f"document.querySelector('{link}') !== null", "the last run's link")
    page.focus(link)
    dashboard.engine.backend.set_schedule_paused("page-focused", True)
    state_is(page, selector, "paused")
    assert page.focused() == "same"
    assert page.text(link) == run_id
    href = page.js("return document.querySelector(arguments[0]).getAttribute('href');", link)
    assert href == "#/runs/" + quote(run_id, safe="")


def test_a_read_only_dashboard_offers_no_buttons(page: Page, dashboard: Dashboard) -> None:
    from durable.web import make_app, serve

    make(dashboard, "page-read-only")
    app = make_app(dashboard.engine, read_only=True)
    server = serve(app, host="127.0.0.1", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        viewer = Page(page.driver, Dashboard(url, app.token, dashboard.engine))
        viewer.login()
        selector = row(page_at_schedules(viewer), "page-read-only")
        assert buttons(viewer, selector) == {"pause": False, "resume": False, "trigger": False}
        dashboard.engine.backend.set_schedule_paused("page-read-only", True)
        state_is(viewer, selector, "paused")  # the page follows (polling)
        assert buttons(viewer, selector) == {"pause": False, "resume": False, "trigger": False}
    finally:
        page.driver.get("about:blank")  # leave first: a refresh cut short is an error
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
