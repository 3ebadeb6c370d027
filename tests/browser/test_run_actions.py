"""The run page's actions in a real headless Chromium, over genuine runs (see
conftest.py): the event form, the cancel and retry buttons (each asks first and records
who acted), and a read-only dashboard that offers none of them."""

from __future__ import annotations

import threading

import pytest

import durable
from tests.browser import dashboard_app as wf
from tests.browser.conftest import Dashboard, Page, eventually
from tests.browser.run_boxes import assert_box

pytestmark = pytest.mark.browser


def test_event_form_resumes_the_waiting_run(page: Page, dashboard: Dashboard) -> None:
    """Bad JSON is refused in the page; Approve + Send resumes the run, naming the sender."""
    run_id = dashboard.waiting_run("order-approval-form")
    page.open_run(run_id)
    page.find("#event-data").clear()
    page.find("#event-data").send_keys("{approved: yes")
    page.click("#event-send")
    page.wait_js("!document.querySelector('#event-error').hidden", "the JSON error")
    assert "not valid JSON" in page.text("#event-error")
    assert not page.js("return document.querySelector('#confirm').open")

    page.click("#event-approve")
    assert page.attribute("#event-data", "value") == '{"approved":true}'
    assert not page.displayed("#event-error")
    page.find("#event-sender").clear()
    page.find("#event-sender").send_keys("alice")
    page.click("#event-send")
    page.confirm()

    dashboard.wait_status(run_id, "completed")
    assert durable.get(run_id).result(timeout=5) == {"approved": True}
    page.wait_js(
        "Array.from(document.querySelectorAll('#actions-body tr'))"
        ".some(tr => tr.cells[1].textContent === 'send' && tr.cells[2].textContent === 'alice')",
        "the send action by alice",
    )
    page.wait_js("document.querySelector('#run-status').textContent === 'completed'", "refresh")
    assert_box(page, "p1", "finished", kind="event")
    assert "alice" in page.text("#events-body")


def test_cancel_button_cancels_the_running_run(page: Page, dashboard: Dashboard) -> None:
    """Cancel asks first, records who asked, and the run ends cancelled (grey)."""
    run_id = dashboard.running_run("order-running-cancel")
    page.open_run(run_id)
    page.click("#cancel-run")
    page.wait_js("document.querySelector('#confirm').open", "the confirmation dialog")
    page.find("#confirm-actor").clear()
    page.find("#confirm-actor").send_keys("bob")
    page.confirm()
    eventually(lambda: dashboard.engine.reread(run_id).cancel_requested, "the cancel request")
    page.wait_js(
        "Array.from(document.querySelectorAll('#actions-body tr'))"
        ".some(tr => tr.cells[1].textContent === 'cancel' && tr.cells[2].textContent === 'bob')",
        "the cancel action by bob",
    )
    dashboard.release(run_id)  # the task returns; the run stops at its next durable call
    dashboard.wait_status(run_id, "cancelled")
    page.wait_js("document.querySelector('#run-status').textContent === 'cancelled'", "refresh")
    cancelled = [key for key, node in page.nodes().items() if node["state"] == "cancelled"]
    assert "end" in cancelled and len(cancelled) == 2
    assert_box(page, next(key for key in cancelled if key != "end"), "cancelled")
    assert not page.displayed("#cancel-run")


def test_retry_button_runs_the_failed_step_again(page: Page, dashboard: Dashboard) -> None:
    """Retry asks first; the failed charge runs again and, accepted now, completes."""
    run_id = "order-retry"
    with pytest.raises(ValueError, match="card declined"):
        durable.execute(wf.checkout, "o-retry", id=run_id)
    page.open_run(run_id)
    assert_box(page, "p1", "failed")
    wf.ACCEPTED.add("o-retry")
    page.click("#retry-run")
    page.confirm()
    dashboard.wait_status(run_id, "completed")
    page.wait_js("document.querySelector('#run-status').textContent === 'completed'", "refresh")
    assert_box(page, "p1", "finished")
    assert "reopened positions: 1" in page.text("#notice")
    actions = page.finds("#actions-body td:nth-child(2)")
    assert [cell.text for cell in actions] == ["retry"]


def test_read_only_dashboard_hides_every_action(page: Page, dashboard: Dashboard) -> None:
    """With read_only the page says so and offers no cancel, retry or event form."""
    from durable.web import make_app, serve

    app = make_app(dashboard.engine, read_only=True)
    server = serve(app, host="127.0.0.1", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        viewer = Page(page.driver, Dashboard(f"http://127.0.0.1:{server.server_port}",
                                             app.token, dashboard.engine))  # fmt: skip
        viewer.login()
        viewer.open_run("order-approval")
        assert viewer.find("#read-only").is_displayed()
        assert not viewer.find("#event-form").is_displayed()
        assert not viewer.find("#cancel-run").is_displayed()
        viewer.open_run("order-failed")
        assert not viewer.find("#retry-run").is_displayed()
    finally:
        # leave first: the page refreshes at each change, and one cut short by the
        # shutdown would be logged as an error
        page.driver.get("about:blank")
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
