"""The workflows page (#/workflows) in a real headless Chromium, over the seeded SQLite
database of overview_seed.py: one row per workflow and task name with figures equal to
the runs table's, columns sorted both ways by click and by keyboard (aria-sort says
which), and a workflow's name opening the runs list filtered to it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser import dashboard_app as wf
from tests.browser import overview_seed as seed
from tests.browser.conftest import Dashboard, Page, forget_earlier_pages

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with seed.served(tmp_path_factory.mktemp("workflows")) as served:
        yield served


@pytest.fixture
def page(driver: Any, board: Dashboard) -> Iterator[Page]:
    """The browser signed in to the seeded dashboard; no page may log an error."""
    browser = Page(driver, board)
    forget_earlier_pages(driver)
    browser.login()
    yield browser
    errors = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


def open_workflows(page: Page) -> None:
    page.open("#/workflows")
    page.wait_js("document.querySelectorAll('#workflows-body tr').length > 5", "the rows")


def rows(page: Page) -> list[dict[str, Any]]:
    return list(
        page.js(
            "return Array.from(document.querySelectorAll('#workflows-body tr')).map(tr => ({"
            " kind: tr.dataset.kind, name: tr.dataset.name,"
            " runs: Number(tr.cells[2].textContent), success: tr.cells[3].textContent,"
            " p95: tr.cells[5].dataset.value === '' ? null : Number(tr.cells[5].dataset.value),"
            " failure: tr.cells[6].getAttribute('title'),"
            " link: tr.cells[0].querySelector('a')"
            " && tr.cells[0].querySelector('a').getAttribute('href'),"
            " spark: tr.cells[7].querySelector('svg').dataset.values.split(',').map(Number),"
            " label: tr.cells[7].querySelector('svg').getAttribute('aria-label')}));"
        )
    )


def sort_state(page: Page) -> dict[str, str]:
    return dict(
        page.js(
            "return Array.from(document.querySelectorAll('#workflows-table th[aria-sort]'))"
            ".map(th => [th.dataset.key, th.getAttribute('aria-sort')]);"
        )
    )


def test_every_name_is_listed_with_the_databases_figures(page: Page, board: Dashboard) -> None:
    """Workflows and tasks appear once each; a workflow's runs, success, last failure
    and 24 hourly counts equal the runs table's; a task links nowhere."""
    open_workflows(page)
    shown = rows(page)
    by_name = {(row["kind"], row["name"]): row for row in shown}
    assert len(by_name) == len(shown)
    workflows = {name for kind, name in by_name if kind == "workflow"}
    assert workflows >= {*seed.BACKDATED, wf.fulfil.name, wf.checkout.name, wf.pack.name}
    tasks = {name for kind, name in by_name if kind == "task"}
    assert {wf.fetch.name, wf.charge.name, wf.label.name} <= tasks

    now = time.time()
    for workflow in seed.BACKDATED:
        row = by_name[("workflow", workflow)]
        completed = seed.expected_ids(board, workflow=workflow, statuses=("completed",))
        failed = seed.expected_ids(board, workflow=workflow, statuses=seed.FAILED)
        assert row["runs"] == len(seed.expected_ids(board, workflow=workflow))
        assert row["success"] == f"{100 * len(completed) / (len(completed) + len(failed)):.1f} %"
        assert row["link"] == f"#/runs?workflow={workflow}"
        assert row["spark"] == seed.expected_hourly(board, workflow, now)
        assert row["label"].endswith(": " + ", ".join(map(str, row["spark"])))
    assert sum(by_name[("workflow", "shop.checkout")]["spark"]) > 0
    charge = by_name[("task", wf.charge.name)]
    assert charge["link"] is None and charge["failure"] is not None


def test_columns_sort_both_ways_by_click_and_keyboard(page: Page) -> None:
    """Runs sorts largest first, then smallest first on a second press (by keyboard);
    names sort A to Z and back; aria-sort marks the one sorted column."""
    from selenium.webdriver.common.keys import Keys

    open_workflows(page)
    assert sort_state(page) == {"name": "ascending"}
    names = [(row["kind"], row["name"]) for row in rows(page)]
    assert [name for _, name in names] == sorted(name for _, name in names)

    page.click('#workflows-table th[data-key="runs"] button')
    page.wait_js("document.querySelector('th[data-key=\"runs\"]').ariaSort === 'descending'", "")
    assert sort_state(page) == {"runs": "descending"}
    runs = [row["runs"] for row in rows(page)]
    assert runs == sorted(runs, reverse=True) and runs[0] > runs[-1]

    button = page.find('#workflows-table th[data-key="runs"] button')
    button.send_keys(Keys.ENTER)
    page.wait_js("document.querySelector('th[data-key=\"runs\"]').ariaSort === 'ascending'", "")
    runs = [row["runs"] for row in rows(page)]
    assert runs == sorted(runs)

    page.find('#workflows-table th[data-key="p95_duration"] button').send_keys(Keys.SPACE)
    page.wait_js("document.querySelector('th[data-key=\"p95_duration\"]').ariaSort", "")
    p95 = [row["p95"] for row in rows(page) if row["p95"] is not None]
    assert p95 == sorted(p95, reverse=True) and len(p95) > 3

    page.click('#workflows-table th[data-key="name"] button')
    page.click('#workflows-table th[data-key="name"] button')
    assert sort_state(page) == {"name": "descending"}
    shown = [row["name"] for row in rows(page)]
    assert shown == sorted(shown, reverse=True)


def test_a_workflows_name_lists_its_runs(page: Page, board: Dashboard) -> None:
    """Clicking mail.digest opens the runs list filtered to exactly its runs."""
    open_workflows(page)
    page.click('#workflows-body tr[data-name="mail.digest"] a')
    page.wait_js("location.hash === '#/runs?workflow=mail.digest'", "the runs list")
    page.wait_js("document.querySelectorAll('#runs-body tr').length > 0", "its runs")
    expected = seed.expected_ids(board, workflow="mail.digest")
    page.wait_js(f"document.querySelectorAll('#runs-body tr').length === {len(expected)}", "all")
    shown = page.js(
        "return Array.from(document.querySelectorAll('#runs-body tr')).map(tr => tr.dataset.key)"
    )
    assert set(shown) == expected
    assert page.js("return document.querySelector('#filters').elements.workflow.value") == (
        "mail.digest"
    )


def test_a_focused_workflow_keeps_the_focus_when_the_figures_change(
    page: Page, board: Dashboard
) -> None:
    """A run of fulfil completing while fulfil's name has the keyboard focus redraws
    its row with one more run, and the focus stays on the name's link."""
    row = f'#workflows-body tr[data-key="workflow:{wf.fulfil.name}"]'
    open_workflows(page)
    before = page.text(f"{row} td:nth-child(3)")
    page.focus(f"{row} a")
    run_id = f"order-focused-{before}"
    board.engine.execute_call(wf.fulfil.bind(run_id), run_id=run_id)
    page.wait_js(
        f"document.querySelector('{row} td:nth-child(3)').textContent !== '{before}'",
        "the row to redraw",
    )
    assert page.focused() == "same"
    assert page.text(f"{row} a") == wf.fulfil.name


def test_a_focused_workflow_keeps_the_focus_when_it_moves_up(page: Page, board: Dashboard) -> None:
    """Sorted by runs, largest first: runs of echo that lift its row above the row
    that was above it move the row, and the focus on echo's name stays where it was."""
    row = f'#workflows-body tr[data-key="workflow:{wf.echo.name}"]'
    board.engine.execute_call(wf.echo.bind("first"), run_id="echo-first")
    open_workflows(page)
    page.wait_js(f"document.querySelector('{row}') !== null", "echo's row")
    page.click('#workflows-table th[data-key="runs"] button')
    page.wait_js("document.querySelector('th[data-key=\"runs\"]').ariaSort === 'descending'", "")
    runs, above, runs_above = page.js(
        "const row = document.querySelector(arguments[0]); const up = row.previousElementSibling;"
        " return [Number(row.cells[2].textContent), up.dataset.key,"
        " Number(up.cells[2].textContent)];",
        row,
    )
    assert runs_above < 20, "the row above echo's is too far ahead for this test"
    page.focus(f"{row} a")
    for n in range(runs_above - runs + 1):
        board.engine.execute_call(wf.echo.bind(n), run_id=f"echo-lift-{runs}-{n}")
    page.wait_js(
        f"document.querySelector('{row}').cells[2].textContent === '{runs_above + 1}'"
        f" && document.querySelector('{row}').compareDocumentPosition(document.querySelector("
        f"'#workflows-body tr[data-key=\"{above}\"]')) & Node.DOCUMENT_POSITION_FOLLOWING",
        "echo's row to move above the other",
    )
    assert page.focused() == "same"
