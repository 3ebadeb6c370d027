"""The run page's Pause and Resume buttons in a real headless Chromium (see conftest.py):
each asks first, records who asked, and the page follows the run (its status chip in
the paused colour, "Pause: requested" while a running run finishes its task)."""

from __future__ import annotations

import threading

import pytest

import durable
from tests.browser.conftest import Dashboard, Page, eventually

pytestmark = pytest.mark.browser

#: the chip colour app.css gives a paused run (--paused).
PAUSED = "rgb(196, 181, 253)"


def shown(page: Page, button: str) -> bool:
    return bool(page.displayed(f"#{button}-run"))


def buttons(page: Page) -> dict[str, bool]:
    return {name: shown(page, name) for name in ("pause", "resume", "cancel", "retry")}


def status_is(page: Page, status: str) -> None:
    page.wait_js(f"document.querySelector('#run-status').textContent === '{status}'", status)


def click(page: Page, button: str, actor: str | None = None) -> None:
    """Click an action button and confirm its dialog (as *actor*, if given)."""
    page.click(f"#{button}-run")
    page.wait_js("document.querySelector('#confirm').open", "the confirmation dialog")
    if actor is not None:
        page.find("#confirm-actor").clear()
        page.find("#confirm-actor").send_keys(actor)
    page.confirm()


def acted(page: Page, action: str, actor: str) -> None:
    page.wait_js(
        "Array.from(document.querySelectorAll('#actions-body tr')).some(tr =>"
        f" tr.cells[1].textContent === '{action}' && tr.cells[2].textContent === '{actor}')",
        f"the {action} action by {actor}",
    )


def test_pause_and_resume_a_waiting_run(page: Page, dashboard: Dashboard) -> None:
    run_id = dashboard.waiting_run("order-pause")
    page.open_run(run_id)
    assert buttons(page) == {"pause": True, "resume": False, "cancel": True, "retry": False}
    click(page, "pause", "bob")
    dashboard.wait_status(run_id, "paused")
    status_is(page, "paused")
    chip = page.find("#run-status")
    assert chip.get_attribute("data-status") == "paused"
    assert page.js("return getComputedStyle(arguments[0]).backgroundColor;", chip) == PAUSED
    acted(page, "pause", "bob")
    assert "Paused: nothing runs until it is resumed." in page.text("#run-waiting")
    assert 'It waits for the event "approval".' in page.text("#run-waiting")
    assert buttons(page) == {"pause": False, "resume": True, "cancel": True, "retry": False}

    click(page, "resume", "carol")
    dashboard.wait_status(run_id, "waiting")  # queued, replayed, back in its wait
    status_is(page, "waiting")
    acted(page, "resume", "carol")
    page.wait_js("!document.querySelector('#pause-run').hidden", "the Pause button again")
    assert buttons(page) == {"pause": True, "resume": False, "cancel": True, "retry": False}


def test_a_running_run_shows_the_pause_request(page: Page, dashboard: Dashboard) -> None:
    """Paused inside a task: "Pause: requested" and Resume (to withdraw it) until the
    task returns and the run parks; resumed, it completes."""
    run_id = dashboard.running_run("order-running-pause")
    page.open_run(run_id)
    click(page, "pause")
    eventually(lambda: dashboard.engine.reread(run_id).pause_requested, "the pause request")
    page.wait_js("document.querySelector('#run-facts').textContent.includes('Pause')", "facts")
    assert page.facts("#run-facts")["Pause"] == "requested"
    assert "Cancel" not in page.facts("#run-facts")
    assert buttons(page) == {"pause": False, "resume": True, "cancel": True, "retry": False}
    dashboard.release(run_id)
    dashboard.wait_status(run_id, "paused")
    status_is(page, "paused")
    assert "Pause" not in page.facts("#run-facts")
    click(page, "resume")
    dashboard.wait_status(run_id, "completed")
    status_is(page, "completed")
    assert buttons(page) == {"pause": False, "resume": False, "cancel": False, "retry": False}


def test_a_cancelled_run_offers_resume(page: Page, dashboard: Dashboard) -> None:
    run_id = dashboard.waiting_run("order-cancel-resume")
    durable.cancel(run_id)
    dashboard.wait_status(run_id, "cancelled")
    page.open_run(run_id)
    assert buttons(page) == {"pause": False, "resume": True, "cancel": False, "retry": False}
    page.click("#resume-run")
    page.wait_js("document.querySelector('#confirm').open", "the confirmation dialog")
    assert "as if it had not been cancelled" in page.text("#confirm-text")
    page.confirm()
    dashboard.wait_status(run_id, "waiting")
    status_is(page, "waiting")


def test_the_runs_list_filters_paused_runs(page: Page, dashboard: Dashboard) -> None:
    from selenium.webdriver.support.ui import Select

    run_id = dashboard.waiting_run("order-listed-paused")
    durable.pause(run_id)
    page.open("#/runs")
    Select(page.find("#filters select[name=status]")).select_by_visible_text("paused")
    page.wait_js(
        "document.querySelectorAll('#runs-body tr').length > 0 &&"
        " Array.from(document.querySelectorAll('#runs-body tr'))"
        ".every(tr => tr.dataset.status === 'paused')",
        "the paused filter",
    )
    assert run_id in page.text("#runs-body")
    Select(page.find("#filters select[name=status]")).select_by_visible_text("any")
    durable.resume(run_id)


def test_a_read_only_dashboard_offers_neither(page: Page, dashboard: Dashboard) -> None:
    from durable.web import make_app, serve

    run_id = dashboard.waiting_run("order-read-only-pause")
    app = make_app(dashboard.engine, read_only=True)
    server = serve(app, host="127.0.0.1", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        viewer = Page(page.driver, Dashboard(url, app.token, dashboard.engine))
        viewer.login()
        viewer.open_run(run_id)
        assert not shown(viewer, "pause") and not shown(viewer, "resume")
        durable.pause(run_id)
        status_is(viewer, "paused")
        assert not shown(viewer, "resume")
    finally:
        page.driver.get("about:blank")  # leave first: a refresh cut short is an error
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
