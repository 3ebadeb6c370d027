"""The dashboard in a real headless Chromium, over genuine runs (see conftest.py).

Colours and shapes are checked through data-state/data-kind attributes and the computed
fill of each box, never through pixels.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

import durable
from tests.browser import dashboard_app as wf
from tests.browser.conftest import ROOT, Dashboard, Page, eventually
from tests.integration.gadgets import payload, write_gadget

pytestmark = pytest.mark.browser

#: the fills app.css gives each state (the contract's colours).
FILLS = {
    "not-reached": "rgb(255, 255, 255)",
    "ready": "rgb(253, 230, 138)",
    "running": "rgb(147, 197, 253)",
    "finished": "rgb(134, 239, 172)",
    "failed": "rgb(252, 165, 165)",
    "cancelled": "rgb(209, 213, 219)",
}
#: the fill of a failed step that timed out (class timed-out).
TIMED_OUT = "rgb(253, 186, 116)"


def assert_box(page: Page, node_id: str, state: str, kind: str | None = None) -> None:
    """The box *node_id* is in *state*, painted in that state's colour."""
    node = page.nodes()[node_id]
    assert node["state"] == state, (node_id, node)
    assert node["fill"] == FILLS[state], (node_id, node)
    if kind is not None:
        assert node["kind"] == kind, (node_id, node)


def test_runs_list_shows_every_run_with_its_status(page: Page, dashboard: Dashboard) -> None:
    """The home page lists the runs with status chips and links; filters narrow it."""
    page.open("#/runs")
    expected = {run_id: state for state, run_id in dashboard.ids.items()}
    page.wait_js(
        f"{len(expected)} <= document.querySelectorAll('#runs-body tr').length", "the runs"
    )
    rows = page.js(
        "return Array.from(document.querySelectorAll('#runs-body tr')).map(tr => ["
        "tr.dataset.key, tr.querySelector('.chip').textContent, tr.querySelector('a').href])"
    )
    shown = {key: (status, href) for key, status, href in rows}
    for run_id, status in expected.items():
        assert shown[run_id][0] == status
        assert shown[run_id][1].endswith("#/runs/" + quote(run_id, safe=""))

    from selenium.webdriver.support.ui import Select

    Select(page.find("#filters select[name=status]")).select_by_visible_text("failed")
    page.wait_js(
        "Array.from(document.querySelectorAll('#runs-body tr'))"
        ".every(tr => tr.dataset.status === 'failed')",
        "the status filter",
    )
    assert page.text("#runs-body").count("order-failed") == 1
    Select(page.find("#filters select[name=status]")).select_by_visible_text("any")


def test_runs_list_shows_and_filters_by_version(page: Page, dashboard: Dashboard) -> None:
    """A run created by a process with a code version shows it in the Version column;
    typing the version in the filter narrows the list to that version's runs (the run
    and the child it started)."""
    # Shares the dashboard's backend, so it is not closed here (that would close both).
    stamped = durable.Engine(backend=dashboard.engine.backend, lease=5.0, version="v7")
    stamped.execute_call(wf.fulfil.bind("o-v7"), run_id="order-v7")
    page.open("#/runs")
    rows = "Array.from(document.querySelectorAll('#runs-body tr'))"
    page.wait_js(f"{rows}.some(tr => tr.dataset.key === 'order-v7')", "the v7 run")
    assert (
        page.js(f"return {rows}.find(tr => tr.dataset.key === 'order-v7').cells[3].textContent")
        == "v7"
    )
    assert (
        page.js(f"return {rows}.find(tr => tr.dataset.key === 'order-ok').cells[3].textContent")
        == "-"
    )
    page.find("#filters input[name=version]").send_keys("v7")
    page.wait_js(  # the run and its child, stamped by the same process
        f"{rows}.length > 0 && {rows}.every(tr => tr.dataset.key.startsWith('order-v7')"
        " && tr.cells[3].textContent === 'v7')",
        "the version filter",
    )
    page.find("#filters input[name=version]").clear()
    page.js("document.getElementById('filters').dispatchEvent(new Event('input'))")
    page.wait_js(f"{rows}.length > 1", "the list without the filter")


def test_completed_run_draws_parallel_steps_and_a_child(page: Page, dashboard: Dashboard) -> None:
    """A finished run: green boxes, the parallel pair side by side, a child box and link."""
    page.open_run("order-ok")
    nodes = page.nodes()
    assert [nodes[f"p{i}"]["kind"] for i in range(4)] == ["task", "task", "task", "workflow"]
    assert {node["state"] for node in nodes.values()} == {"finished"}
    assert_box(page, "p0", "finished")
    assert nodes["p1"]["y"] == nodes["p2"]["y"] > nodes["p0"]["y"]
    assert nodes["p3"]["shape"] == "child" and nodes["p3"]["y"] > nodes["p1"]["y"]
    assert page.text("#run-status") == "completed"
    assert '"cents": 1250' in page.text("#run-output")
    assert page.finds("#run-family a")[0].text.startswith("order-ok")
    assert len(page.finds("#timeline-box rect.bar")) == 4
    assert len(page.finds("#history-body tr")) == 4
    assert page.displayed("#cancel-run") is False
    assert page.displayed("#retry-run") is False
    assert page.displayed("#event-form") is False

    page.click("#run-family a")
    page.wait_js("document.querySelector('#run-id').textContent === 'order-ok/3'", "the child")
    page.wait_js("document.querySelector('g.node[data-id=\"end\"]') !== null", "its graph")
    assert page.text("#run-status") == "completed"
    assert page.facts("#run-facts")["Parent"] == "order-ok"
    assert_box(page, "p0", "finished", kind="task")


def test_failed_run_is_red_and_offers_retry(page: Page) -> None:
    """The failed step and the end are red; the error and its traceback are shown."""
    page.open_run("order-failed")
    assert_box(page, "p0", "finished")
    assert_box(page, "p1", "failed", kind="task")
    assert page.nodes()["end"]["state"] == "failed"
    assert "ValueError: card declined for o-2" in page.text("#run-error")
    assert "Traceback" in page.js("return document.querySelector('#run-traceback').textContent")
    assert page.displayed("#retry-run")
    assert not page.displayed("#cancel-run")


def test_clicking_a_box_opens_its_details(page: Page) -> None:
    """The side panel shows the step's input, output or error, attempts and task stats."""
    page.open_run("order-failed")
    page.node(1).click()
    page.wait_js("!document.querySelector('#panel').hidden", "the panel")
    assert page.text("#panel-title") == "tests.browser.dashboard_app.charge"
    assert "o-2" in page.text("#panel-input")
    assert "card declined for o-2" in page.text("#panel-error")
    assert "ValueError" in page.text("#panel-traceback")
    facts = page.facts("#panel-facts")
    assert (facts["Attempts"], facts["Status"], facts["Kind"]) == ("2", "failed", "task")
    page.wait_js("document.querySelector('#panel-stats').textContent.includes('Runs')", "stats")
    assert page.facts("#panel-stats")["Success"] == "0.0 %"

    page.node(0).click()
    page.wait_js("document.querySelector('#panel').dataset.position === '0'", "another box")
    assert '"items": 2' in page.text("#panel-output")
    assert not page.displayed("#panel-error-box")
    page.wait_js("document.querySelector('#panel-stats').textContent.includes('100.0 %')", "stats")
    page.click("#panel-close")
    assert not page.displayed("#panel")


def test_waiting_run_is_yellow_with_an_event_form(page: Page) -> None:
    """A run waiting for an event: the event box is ready, the form names the event."""
    page.open_run("order-approval")
    assert_box(page, "p0", "finished")
    assert_box(page, "p1", "ready", kind="event")
    assert page.nodes()["p1"]["shape"] == "event"
    assert 'Waiting for the event "approval"' in page.text("#run-waiting")
    assert page.displayed("#event-form")
    assert page.attribute("#event-name", "value") == "approval"
    assert page.displayed("#cancel-run")


def test_running_run_is_blue_with_expected_steps_dashed(page: Page) -> None:
    """A run busy in a task: its recorded start is a blue box named after the task, then
    the expected boxes in white."""
    page.open_run("order-running")
    assert_box(page, "p0", "finished")
    assert_box(page, "p1", "running")
    assert_box(page, "p2", "not-reached", kind="task")
    assert page.text('g.node[data-id="p1"] .label') == "hold"
    assert page.displayed("#cancel-run")
    assert not page.displayed("#retry-run")


def test_a_running_task_with_progress_shows_its_bar_and_percentage(
    page: Page, dashboard: Dashboard
) -> None:
    """A running task that heartbeated {"done": 40, "of": 100}: its blue box holds a bar
    filled to 40% of its track and the text "40%"; its panel shows the heartbeat."""
    run_id = dashboard.running_run("order-crunching", wf.crunch)
    page.open_run(run_id)
    assert_box(page, "p1", "running", kind="task")
    box = 'g.node[data-id="p1"]'
    bar = page.wait_js(
        f"document.querySelector('{box} g.progress')",
        "the progress bar",
    )
    assert bar.get_attribute("data-progress") == "0.4"
    track, fill = (
        float(page.attribute(f"{box} rect.progress-{part}", "width")) for part in ("track", "bar")
    )
    assert fill == pytest.approx(0.4 * track, abs=0.1)
    assert page.text(f"{box} .detail") == "40%"
    assert not page.finds('g.node[data-id="p0"] g.progress')  # finished: no bar

    page.node(1).click()
    page.wait_js("document.querySelector('#panel').dataset.position === '1'", "the panel")
    facts = page.facts("#panel-facts")
    assert (facts["Status"], facts["Attempts"], facts["Progress"]) == ("running", "1", "40 %")
    assert facts["Heartbeat"][:4].isdigit()
    assert re.fullmatch(r"\d+ ms|\d+\.\d s|\d+m \d\ds", facts["Elapsed"]), facts["Elapsed"]
    assert page.displayed("#panel-details-box")
    assert '"done": 40' in page.text("#panel-details")

    dashboard.release(run_id)
    dashboard.wait_status(run_id, "completed")
    page.wait_js("document.querySelector('#run-status').textContent === 'completed'", "refresh")
    assert_box(page, "p1", "finished")
    assert not page.finds(f"{box} g.progress")


def test_a_timed_out_step_has_its_own_colour(page: Page) -> None:
    """A task whose only attempt ran past its timeout: its box and timeline bar are
    orange (timed-out), not the plain red of a failure, and the panel says so."""
    run_id = "order-overrun"
    with pytest.raises(durable.TaskTimeout):
        durable.execute(wf.overrun, "o-late", id=run_id)
    page.open_run(run_id)
    node = page.nodes()["p0"]
    assert (node["state"], node["fill"]) == ("failed", TIMED_OUT)
    assert "timed-out" in page.node(0).get_attribute("class")
    assert page.text('g.node[data-id="p0"] .detail') == "TaskTimeout"
    bar = page.find('#timeline-box rect.bar[data-position="0"]')
    assert "timed-out" in bar.get_attribute("class")
    assert page.js("return getComputedStyle(arguments[0]).fill", bar) == TIMED_OUT
    page.node(0).click()
    page.wait_js("!document.querySelector('#panel').hidden", "the panel")
    assert page.facts("#panel-facts")["Timed out"] == "yes (TaskTimeout)"


def test_a_timed_out_run_has_its_own_colour(page: Page, dashboard: Dashboard) -> None:
    """A run that reached its deadline: an orange timed_out chip (neither the red of a
    failure nor the grey of a cancellation), its deadline among the facts, a "timed
    out" box where it was stopped, and no retry (nor cancel) offered."""
    run_id = "order-overdue"
    durable.dispatch(wf.overdue, "o-overdue", id=run_id)
    dashboard.wait_status(run_id, "timed_out")
    page.open_run(run_id)
    chip = page.find("#run-status")
    assert chip.text == "timed_out"
    assert "status-timed_out" in chip.get_attribute("class")
    background = page.js("return getComputedStyle(arguments[0]).backgroundColor", chip)
    assert background == TIMED_OUT
    assert page.facts("#run-facts")["Deadline"] not in ("", "—")
    assert "WorkflowTimeout" in page.text("#run-error")
    assert page.text('g.node[data-id="p1"] .label') == "timed out"
    assert page.nodes()["end"]["state"] == "failed"
    assert not page.displayed("#retry-run")
    assert not page.displayed("#cancel-run")

    from selenium.webdriver.support.ui import Select

    page.open("#/runs")
    Select(page.find("#filters select[name=status]")).select_by_visible_text("timed_out")
    page.wait_js(
        "(rows => rows.length > 0 && rows.every(tr => tr.dataset.status === 'timed_out'))"
        "(Array.from(document.querySelectorAll('#runs-body tr')))",
        "the timed_out filter",
    )
    assert page.text("#runs-body").count(run_id) == 1


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


def test_markup_in_ids_and_payloads_renders_as_text(page: Page, dashboard: Dashboard) -> None:
    """A run id and an input holding <img onerror> show as text; no element is made."""
    markup = "<img src=x onerror=alert(1)>"
    run_id = f"xss-{markup}"
    durable.execute(wf.echo, markup, id=run_id)
    page.open("#/runs")
    page.find("#filters input[name=search]").send_keys("xss-")
    page.wait_js("document.querySelectorAll('#runs-body tr').length === 1", "the search")
    assert page.text("#runs-body a") == run_id
    page.click("#runs-body a")
    page.wait_js(f"document.querySelector('#run-id').textContent === {run_id!r}", "the run")
    page.wait_js("document.querySelector('#run-input').textContent.includes('onerror')", "input")
    assert markup in page.text("#run-output")
    assert page.js("return document.querySelectorAll('img').length") == 0
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        _ = page.driver.switch_to.alert.text


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


def test_screenshot_of_a_run_page(page: Page) -> None:
    """A picture of a run page for people to look at (artifacts/dashboard-run.png)."""
    page.open_run("order-approval")
    page.wait_js("document.querySelectorAll('#timeline-box rect.bar').length === 2", "timeline")
    target = ROOT / "artifacts" / "dashboard-run.png"
    page.screenshot(target)
    assert target.read_bytes().startswith(b"\x89PNG")


def test_a_run_whose_input_names_a_module_never_imports_it(
    page: Page, dashboard: Dashboard, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row whose type tag names a module on the path: its run page renders the value
    as what it claims to be, and the module is never imported (its marker never appears)."""
    gadget = write_gadget(tmp_path)
    monkeypatch.syspath_prepend(str(gadget.folder))
    run_id = "gadget-run"
    durable.dispatch(wf.echo, "x", id=run_id, queue="parked")  # no worker serves it
    value = gadget.tag("dataclass", "Gadget", v={"name": "from-a-row"})
    data = payload({"args": [value], "kwargs": {}})
    database = str(dashboard.engine.backend.url.database)  # type: ignore[attr-defined]
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE durable_runs SET input = ? WHERE id = ?", (data, run_id))
    page.open("#/runs/" + quote(run_id, safe=""))
    page.wait_js("document.querySelector('#run-status').textContent === 'queued'", "the run")
    page.wait_js("document.querySelector('#run-input').textContent.includes('from-a-row')", "input")
    assert '"type": "Gadget"' in page.text("#run-input")
    assert not gadget.marker.exists(), "the dashboard imported the module the row names"
    assert gadget.name not in sys.modules
