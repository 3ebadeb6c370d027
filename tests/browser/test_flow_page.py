"""The flow page in a real headless Chromium (see conftest.py), over real flows run by
the dashboard's worker: the DAG drawn with one box per task and one arrow per
dependency, coloured by status; a failed box restarted from its panel runs again and
finishes; a human task's form completes it and its dependents run; a nested flow's box
opens into its own graph; and a 1,000-task flow renders in time (printed)."""

from __future__ import annotations

import itertools
import json
import os
import random
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

import durable.flows  # the dashboard's worker runs flows once this is imported
from durable.flows.settings import form_link
from tests.browser.conftest import Dashboard, Page, eventually

pytestmark = pytest.mark.browser

_ids = itertools.count()
#: the fill app.css gives a task box in each status.
FILLS = {
    "not_ready": "rgb(255, 255, 255)",
    "ready": "rgb(253, 230, 138)",
    "waiting": "rgb(254, 243, 199)",
    "running": "rgb(147, 197, 253)",
    "finished": "rgb(134, 239, 172)",
    "failed": "rgb(252, 165, 165)",
    "killed": "rgb(126, 34, 206)",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the flow files go; the launches' files go under it too (launches keep them
    by flow id: none of an earlier test run's may be taken for one of these)."""
    directory = tmp_path_factory.mktemp("flow-files")
    state = os.environ.get("DURABLE_FLOW_DIR")
    os.environ["DURABLE_FLOW_DIR"] = str(directory / "state")
    yield directory
    if state is None:
        del os.environ["DURABLE_FLOW_DIR"]
    else:
        os.environ["DURABLE_FLOW_DIR"] = state


def start(dashboard: Dashboard, files: Path, text: str, prefix: str) -> str:
    """Start the flow file *text* on the dashboard's database; its id."""
    flow_id = f"{prefix}-{next(_ids)}"
    path = files / f"{flow_id}.toml"
    path.write_text(text)
    durable.flows.start(path, id=flow_id, engine=dashboard.engine)
    return flow_id


def statuses(dashboard: Dashboard, flow_id: str) -> dict[str, str]:
    view = durable.flows.view(flow_id, engine=dashboard.engine)
    return {task["name"]: task["status"] for task in view["tasks"]}


def wait_statuses(dashboard: Dashboard, flow_id: str, **wanted: str) -> None:
    eventually(
        lambda: all(statuses(dashboard, flow_id)[k] == v for k, v in wanted.items()),
        f"{flow_id} to reach {wanted}",
    )


def release(marker: Path, form: str = '{ approved = "bool", notes = "str?" }') -> str:
    """build; unit (fails until *marker* exists); a human ui_check; a slow docs task;
    upload after unit and ui_check."""
    check = shlex.quote(str(marker))
    return f"""
[flow]
name = "release"

[task.build]
command = ["true"]

[task.unit]
command = ["sh", "-c", "test -f {check} || (echo no marker here; exit 3)"]
depends_on = ["build"]

[task.ui_check]
kind = "human"
assignee = "qa@example.com"
form = {form}
depends_on = ["build"]

[task.docs]
command = ["sh", "-c", "while ! test -f {check}.docs; do sleep 0.1; done"]
depends_on = ["build"]

[task.upload]
command = ["true"]
depends_on = ["unit", "ui_check"]
"""


def open_flow(page: Page, flow_id: str) -> None:
    page.open("#/flows/" + quote(flow_id, safe=""))
    page.wait_js(
        "document.querySelector('#flow-graph-box').hasAttribute('data-rendered-ms')",
        f"flow {flow_id} to render",
    )


def boxes(page: Page) -> dict[str, dict[str, Any]]:
    """Every task box: its status, kind and the computed fill of its outline."""
    return dict(
        page.js(
            """
            const out = {};
            for (const g of document.querySelectorAll('g.task')) {
              out[g.dataset.name] = {
                status: g.dataset.status, kind: g.dataset.kind,
                fill: getComputedStyle(g.querySelector('.shape')).fill,
                person: g.querySelector('.person') !== null,
              };
            }
            return out;
            """
        )
    )


def box_status_is(page: Page, task: str, status: str) -> None:
    page.wait_js(
        f"document.querySelector('g.task[data-name=\"{task}\"]').dataset.status === '{status}'",
        f"the box of {task} to be {status}",
    )


def click_box(page: Page, task: str) -> None:
    page.click(f'g.task[data-name="{task}"]')
    page.wait_js(
        f"!document.querySelector('#flow-panel').hidden && "
        f"document.querySelector('#flow-panel').dataset.task === '{task}'",
        f"the panel of {task}",
    )


def test_the_dag_renders_with_arrows_and_colours(
    page: Page, dashboard: Dashboard, files: Path, tmp_path: Path
) -> None:
    """One box per task and one arrow per dependency; each box's status is the flow's,
    and its colour the status's; the human task carries a person mark. Boxes follow
    the flow in place; a running box offers Kill, and a killed one is drawn so."""
    marker = tmp_path / "pass"
    flow_id = start(dashboard, files, release(marker), "draw")
    wait_statuses(dashboard, flow_id, unit="failed", ui_check="waiting", docs="running")
    try:
        open_flow(page, flow_id)
        drawn = boxes(page)
        assert set(drawn) == {"build", "unit", "ui_check", "docs", "upload"}
        expected = statuses(dashboard, flow_id)
        assert {name: box["status"] for name, box in drawn.items()} == expected
        for name, box in drawn.items():
            assert box["fill"] == FILLS[box["status"]], (name, box)
        assert drawn["ui_check"]["person"] and not drawn["unit"]["person"]
        arrows = page.js(
            "return Array.from(document.querySelectorAll('path.flow-edge'))"
            ".map(p => [p.dataset.from, p.dataset.to, p.getAttribute('marker-end')]);"
        )
        assert sorted(map(tuple, arrows)) == sorted(
            (dep, task, "url(#flow-arrow)")
            for task, deps in {
                "unit": ["build"], "ui_check": ["build"], "docs": ["build"],
                "upload": ["unit", "ui_check"],
            }.items()
            for dep in deps
        )  # fmt: skip
        legend = page.js(
            "return Array.from(document.querySelectorAll('.flow-page .legend li'))"
            ".map(li => li.textContent);"
        )
        assert legend == ["not ready", "ready", "waiting for input", "running", "finished",
                          "failed", "killed"]  # fmt: skip
        # live: a status that changes is repainted in place (the <g> stays the same)
        before = page.find('g.task[data-name="build"]')
        marker.write_text("fixed")
        page.click('g.task[data-name="unit"]')
        page.wait_js("!document.querySelector('#task-restart').hidden", "the Restart button")
        page.click("#task-restart")
        page.confirm()
        box_status_is(page, "unit", "finished")
        assert page.find('g.task[data-name="build"]') == before
        assert boxes(page)["unit"]["fill"] == FILLS["finished"]
        # a running command offers Kill (not Restart), and killed is drawn as such
        click_box(page, "docs")
        assert page.displayed("#task-kill")
        assert not page.displayed("#task-restart")
        page.click("#task-kill")
        page.confirm()
        box_status_is(page, "docs", "killed")
        assert boxes(page)["docs"]["fill"] == FILLS["killed"]
        assert page.displayed("#task-restart")
        assert statuses(dashboard, flow_id)["docs"] == "killed"
    finally:
        Path(f"{marker}.docs").write_text("go")


def test_restart_a_failed_box_from_its_panel(
    page: Page, dashboard: Dashboard, files: Path, tmp_path: Path
) -> None:
    """The failed unit's panel shows its exit code and log and offers Restart (not
    Kill); restarted after the fix, its box leaves failed and ends finished."""
    marker = tmp_path / "pass"
    Path(f"{marker}.docs").write_text("go")
    flow_id = start(dashboard, files, release(marker), "restart")
    wait_statuses(dashboard, flow_id, unit="failed", docs="finished")
    open_flow(page, flow_id)
    click_box(page, "unit")
    facts = page.facts("#flow-panel-facts")
    assert facts["Exit code"] == "3" and facts["Kind"] == "command"
    assert facts["Command"].startswith("sh -c ")
    page.wait_js("document.querySelector('#task-log').textContent.includes('no marker here')",
                 "the log tail")  # fmt: skip
    assert page.displayed("#task-restart")
    assert not page.displayed("#task-kill")
    assert not page.displayed("#task-form")
    marker.write_text("fixed")
    page.click("#task-restart")
    page.confirm()
    box_status_is(page, "unit", "finished")
    view = durable.flows.view(flow_id, engine=dashboard.engine)
    unit = next(task for task in view["tasks"] if task["name"] == "unit")
    assert unit["launches"] == 2 and unit["exit_code"] == 0
    page.wait_js("document.querySelector('#flow-panel').dataset.status === 'finished'",
                 "the panel to follow")  # fmt: skip
    assert page.facts("#flow-panel-facts")["Exit code"] == "0"


def test_the_human_form_completes_the_task(
    page: Page, dashboard: Dashboard, files: Path, tmp_path: Path
) -> None:
    """The link of ui_check's notification opens its panel, with a form built from its
    fields; an answer the form refuses shows the API's reason in the panel; a good one
    finishes the task, recorded with who answered, and upload, which depends on it,
    runs."""
    marker = tmp_path / "pass"
    marker.write_text("ok")
    Path(f"{marker}.docs").write_text("go")
    form = '{ approved = "bool", score = "int", notes = "str?" }'
    flow_id = start(dashboard, files, release(marker, form), "human")
    wait_statuses(dashboard, flow_id, unit="finished", ui_check="waiting")
    # the link a human task's notification carries opens the page on its form
    link = form_link(flow_id, "ui_check")
    page.open(link[link.index("#") :])
    page.wait_js(
        "!document.querySelector('#flow-panel').hidden &&"
        " document.querySelector('#flow-panel').dataset.task === 'ui_check' &&"
        " !document.querySelector('#task-form').hidden",
        "the form the link points at",
    )
    assert page.text("#task-form-assignee") == "Assigned to qa@example.com."
    fields = page.js(
        "return Array.from(document.querySelectorAll('#task-form-fields input'))"
        ".map(i => [i.name, i.type]);"
    )
    assert fields == [["approved", "checkbox"], ["score", "number"], ["notes", "text"]]
    assert "(optional)" in page.find("#task-form-fields label:nth-child(3)").text
    assert not page.displayed("#task-restart")

    page.click("#task-done")  # score left empty: the API names it
    page.confirm()
    error = page.wait_js(
        "!document.querySelector('#flow-panel-error').hidden &&"
        " document.querySelector('#flow-panel-error').textContent",
        "the refusal in the panel",
    )
    assert "score" in error
    logged = [e["message"] for e in page.driver.get_log("browser") if e["level"] == "SEVERE"]
    assert logged and all("/ui_check/done" in line and "400" in line for line in logged)

    page.click('#task-form-fields input[name="approved"]')
    page.find('#task-form-fields input[name="score"]').send_keys("7")
    page.click("#task-done")
    page.wait_js("document.querySelector('#confirm').open", "the confirmation dialog")
    page.find("#confirm-actor").clear()
    page.find("#confirm-actor").send_keys("Quinn")
    page.confirm()
    box_status_is(page, "ui_check", "finished")
    page.wait_js("document.querySelector('#flow-panel-error').hidden", "the error to clear")
    box_status_is(page, "upload", "finished")
    view = durable.flows.view(flow_id, engine=dashboard.engine)
    answered = next(task for task in view["tasks"] if task["name"] == "ui_check")
    assert answered["data"] == {"approved": True, "score": 7} and answered["by"] == "Quinn"
    assert not page.displayed("#task-form")
    assert page.facts("#flow-panel-facts")["Answered by"] == "Quinn"


def test_a_nested_flow_opens_into_its_own_graph(
    page: Page, dashboard: Dashboard, files: Path
) -> None:
    """The run page of a flow links to its flow page; a nested flow's box (drawn
    double) opens into the nested flow's graph, which links back to its parent."""
    (files / "inner.toml").write_text(
        '[flow]\nname = "inner"\n[task.a]\ncommand = ["true"]\n'
        '[task.b]\ncommand = ["true"]\ndepends_on = ["a"]\n'
    )
    outer = start(dashboard, files, '[flow]\nname = "outer"\n[task.sub]\nflow = "inner.toml"\n'
                  '[task.last]\ncommand = ["true"]\ndepends_on = ["sub"]\n', "outer")  # fmt: skip
    wait_statuses(dashboard, outer, sub="finished", last="finished")
    page.open_run(outer)
    link = page.find("#run-facts a[href^='#/flows/']")
    assert link.text == outer
    link.click()
    page.wait_js(
        f"document.querySelector('#flow-id') && document.querySelector('#flow-id').textContent"
        f" === {outer!r} && document.querySelector('#flow-graph-box').dataset.renderedMs",
        "the flow page",
    )
    assert boxes(page)["sub"]["kind"] == "flow"
    assert page.find('g.task[data-name="sub"] rect.inner') is not None
    click_box(page, "sub")
    page.click("#task-subflow")
    page.wait_js(
        "document.querySelector('#flow-name').textContent === 'inner' &&"
        " document.querySelectorAll('g.task').length === 2",
        "the nested flow's graph",
    )
    assert set(boxes(page)) == {"a", "b"}
    parent = page.find("#flow-facts a[href^='#/flows/']")
    assert parent.text == outer


@pytest.mark.parametrize("where", ["list", "page"])
def test_a_focused_link_keeps_the_focus_when_the_flow_moves_on(
    page: Page, dashboard: Dashboard, files: Path, tmp_path: Path, where: str
) -> None:
    """The flow's link in the flows list (#/flows), or its run's link on its page, has
    the keyboard focus while its task finishes: the list or the facts are redrawn with
    the new counts, and the focus stays on that link."""
    marker = tmp_path / "go"
    check = shlex.quote(str(marker))
    text = (
        '[flow]\nname = "focus"\n[task.hold]\n'
        f'command = ["sh", "-c", "while ! test -f {check}; do sleep 0.1; done"]\n'
    )
    flow_id = start(dashboard, files, text, f"focus-{where}")
    wait_statuses(dashboard, flow_id, hold="running")
    if where == "list":
        page.open("#/flows")
        part = f'#flows-body tr[data-key="{flow_id}"]'
        link = f"{part} a"
    else:
        open_flow(page, flow_id)
        part = "#flow-facts"
        link = "#flow-facts a[href^='#/runs/']"
    shown = f"document.querySelector({json.dumps(part)}).textContent"
    page.wait_js(f"document.querySelector({json.dumps(link)}) !== null", "the link")
    before = page.js(f"return {shown};")
    assert "1 running" in before
    page.focus(link)
    marker.write_text("go")
    wait_statuses(dashboard, flow_id, hold="finished")
    page.wait_js(f"{shown} !== {json.dumps(before)}", "the counts to change")
    assert page.focused() == "same"
    assert page.text(link) == flow_id


def test_a_thousand_task_flow_renders_and_stays_usable(
    page: Page, dashboard: Dashboard, files: Path
) -> None:
    """A generated DAG of 1,000 tasks with about 2,000 dependencies (all behind a human
    gate, so nothing runs) draws every box and arrow in well under 10 s; a click on a
    box still opens its panel at once, and Escape closes it."""
    from selenium.webdriver.common.keys import Keys

    rng = random.Random(18)
    lines = ['[flow]\nname = "etl"\n[task.t0]\nkind = "human"\n']
    edges = 0
    for i in range(1, 1000):
        deps = sorted(
            {f"t{rng.randrange(max(0, i - 60), i)}" for _ in range(rng.choice([1, 2, 3]))}
        )
        edges += len(deps)
        lines.append(f'[task.t{i}]\ncommand = ["true"]\ndepends_on = {deps!r}\n'.replace("'", '"'))
    flow_id = start(dashboard, files, "".join(lines), "etl")
    wait_statuses(dashboard, flow_id, t0="waiting")
    open_flow(page, flow_id)
    rendered = float(page.attribute("#flow-graph-box", "data-navigation-ms"))
    mounted = float(page.attribute("#flow-graph-box", "data-rendered-ms"))
    built = float(page.attribute("#flow-graph-box", "data-build-ms"))
    print(
        f"\n1,000-task flow ({edges} dependencies): boxes drawn {rendered:.0f} ms after "
        f"navigation ({mounted:.0f} ms after the page mounted, {built:.0f} ms building)"
    )
    assert page.js("return document.querySelectorAll('g.task').length;") == 1000
    assert page.js("return document.querySelectorAll('path.flow-edge').length;") == edges
    assert rendered < 10_000
    counts = page.js(
        "const c = {}; for (const g of document.querySelectorAll('g.task'))"
        " c[g.dataset.status] = (c[g.dataset.status] || 0) + 1; return c;"
    )
    assert counts == {"waiting": 1, "not_ready": 999}
    started = page.js("return performance.now();")
    page.js("document.querySelector('g.task[data-name=\"t500\"]').scrollIntoView();")
    click_box(page, "t500")
    opened = page.js("return performance.now();") - started
    print(f"a click on a box opened its panel in {opened:.0f} ms")
    assert opened < 2_000
    assert page.attribute('g.task[data-name="t500"]', "class").endswith("selected")
    page.find("body").send_keys(Keys.ESCAPE)
    page.wait_js("document.querySelector('#flow-panel').hidden", "Escape to close the panel")
    assert "selected" not in page.attribute('g.task[data-name="t500"]', "class")
