"""The dashboard's run page in a real headless Chromium, over genuine runs (see
conftest.py): each state's boxes, the details of a step, progress, timed-out steps and
runs, and a screenshot.

Colours and shapes are checked through data-state/data-kind attributes and the computed
fill of each box, never through pixels (run_boxes.py).
"""

from __future__ import annotations

import re

import pytest

import durable
from tests.browser import dashboard_app as wf
from tests.browser.conftest import ROOT, Dashboard, Page
from tests.browser.run_boxes import TIMED_OUT, assert_box

pytestmark = pytest.mark.browser


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


@pytest.mark.parametrize(
    ("name", "link"),
    [
        ("waiting", "#run-waiting a"),
        ("children", "#run-family a:last-of-type"),
        ("history", '#history-body tr[data-key="0"] a'),
        ("facts", "#run-facts a"),
    ],
    ids=["waiting", "children", "history", "facts"],
)
def test_a_focused_link_keeps_the_focus_when_the_run_changes(
    page: Page, dashboard: Dashboard, name: str, link: str
) -> None:
    """An event sent to the run whose page is open while one of its links has the
    keyboard focus (the run it waits for, a child, the child of a step, its parent)
    redraws the page with the event, and the focus stays on that link. `brood` waits
    for its second child, which is blocked in `hold`; the facts are the child's."""
    run_id = dashboard.running_run(f"order-brood-{name}", wf.brood)
    try:
        dashboard.wait_status(run_id, "waiting")
        shown = f"{run_id}/1" if name == "facts" else run_id
        page.open_run(shown)
        page.wait_js(f"document.querySelector('{link}') !== null", "the link")
        href = page.attribute(link, "href")
        page.focus(link)
        durable.send(shown, "nudge", {"from": "a test"})
        page.wait_js("document.querySelectorAll('#events-body tr').length === 1", "the event")
        assert page.focused() == "same"
        assert page.attribute(link, "href") == href
    finally:
        dashboard.release(run_id)  # the child's worker slot is free again
    dashboard.wait_status(run_id, "completed")


def test_screenshot_of_a_run_page(page: Page) -> None:
    """A picture of a run page for people to look at (artifacts/dashboard-run.png)."""
    page.open_run("order-approval")
    page.wait_js("document.querySelectorAll('#timeline-box rect.bar').length === 2", "timeline")
    target = ROOT / "artifacts" / "dashboard-run.png"
    page.screenshot(target)
    assert target.read_bytes().startswith(b"\x89PNG")
