"""The overview page (#/) in a real headless Chromium, over a seeded SQLite database (see
overview_seed.py): every figure it shows equals what the runs table says, its counts and
bars open the runs list filtered to exactly their runs, old #/?filters links still
reach the list, and it holds up in dark mode and on a phone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser import overview_seed as seed
from tests.browser.conftest import Dashboard, Page, forget_earlier_pages

pytestmark = pytest.mark.browser

ACTIVE = ["queued", "running", "waiting", "blocked", "paused"]
ENDED = ["completed", "failed", "cancelled", "dead", "timed_out", "continued"]


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with seed.served(tmp_path_factory.mktemp("overview")) as served:
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


def open_overview(page: Page) -> None:
    page.open("#/")
    page.wait_js(
        "document.querySelectorAll('#ov-hours a.bar').length === 168 * 3"
        " && document.querySelectorAll('#ov-counts a.count').length === 11",
        "the overview to draw",
    )


def bars(page: Page, chart: str) -> list[dict[str, Any]]:
    return list(
        page.js(
            "return Array.from(document.querySelectorAll(arguments[0] + ' a.bar')).map(a => ({"
            " at: a.dataset.at, series: a.dataset.series, value: Number(a.dataset.value),"
            " href: a.getAttribute('href'), label: a.getAttribute('aria-label'),"
            " title: a.querySelector('title').textContent,"
            " height: Number(a.querySelector('.fill').getAttribute('height'))}));",
            chart,
        )
    )


def listed(page: Page) -> set[str]:
    """The ids the runs list shows, once it has drawn from its filters."""
    page.wait_js(
        "document.querySelector('#runs-body') !== null && (document.querySelectorAll("
        "'#runs-body tr').length > 0 || !document.querySelector('#runs-empty').hidden)",
        "the filtered runs list",
    )
    rows = page.js(
        "return Array.from(document.querySelectorAll('#runs-body tr')).map(tr => tr.dataset.key)"
    )
    assert len(rows) < 50, "a filter this test checks must fit on one page"
    return set(rows)


def test_counts_and_attention_cards_equal_the_database(page: Page, board: Dashboard) -> None:
    """Each status count is the number of runs the table holds in it (ended statuses:
    created since the window the page states); blocked and dead cards too."""
    open_overview(page)
    since = page.attribute("#ov-since", "title")
    assert since is not None
    shown = dict(
        page.js(
            "return Array.from(document.querySelectorAll('#ov-counts a.count')).map(a =>"
            " [a.dataset.status, [Number(a.querySelector('strong').textContent),"
            " a.getAttribute('href'), a.querySelector('.chip').textContent]]);"
        )
    )
    assert list(shown) == ACTIVE + ENDED
    for status in ACTIVE:
        assert shown[status][0] == seed.expected_status_count(board, status, None), status
        assert shown[status][1] == f"#/runs?status={status}"
    for status in ENDED:
        assert shown[status][0] == seed.expected_status_count(board, status, since), status
        assert shown[status][1].startswith(f"#/runs?status={status}&since=")
    assert all(text == status for status, (_, _, text) in shown.items())  # text, not colour
    assert shown["queued"][0] == 2 and shown["blocked"][0] == 1 and shown["failed"][0] > 0

    blocked = page.find("#ov-blocked")
    assert blocked.get_attribute("data-count") == "1" and blocked.text.endswith("1 blocked run")
    assert "durable check" in page.text("#ov-advice")
    dead = seed.expected_status_count(board, "dead", None)
    assert page.attribute("#ov-dead", "data-count") == str(dead) and dead > 0


def test_charts_are_drawn_and_every_bar_equals_the_database(page: Page, board: Dashboard) -> None:
    """Both charts have their buckets, some bars above zero, and each bar's figure (in
    its data, its title and its label) is the runs table's count for its bucket."""
    open_overview(page)
    for chart, grain, count in (("#ov-minutes", 60, 60), ("#ov-hours", 3600, 168)):
        drawn = bars(page, chart)
        assert len(drawn) == count * 3
        assert sum(bar["value"] for bar in drawn if bar["series"] == "started") > 10
        assert any(bar["height"] > 0 for bar in drawn if bar["series"] == "failed")
        for bar in drawn:
            expected = seed.expected_bucket(board, bar["at"], grain, bar["series"])
            assert bar["value"] == expected, (chart, bar)
            assert bar["title"] == bar["label"] and bar["label"].startswith(f"{expected} run")
            assert (bar["height"] > 0) == (expected > 0), bar
        legend = page.js(
            "return Array.from(document.querySelectorAll(arguments[0] + ' .legend li'))"
            ".map(li => li.textContent);",
            chart,
        )
        assert legend == ["started", "completed", "failed, dead or timed out"]
        labels = page.js(
            "return document.querySelectorAll(arguments[0] + ' .x-label').length", chart
        )
        assert labels >= 5  # the time axis is labelled


def test_tables_equal_the_database(page: Page, board: Dashboard) -> None:
    """Workflows' runs, success and p95; the failing task; the queue; the schedule."""
    open_overview(page)
    page.wait_js("document.querySelectorAll('#ov-workflows tr').length >= 5", "the workflows")
    rows = {
        row[0]: row[1:]
        for row in page.js(
            "return Array.from(document.querySelectorAll('#ov-workflows tr')).map(tr => ["
            " tr.dataset.key, Number(tr.cells[1].textContent), tr.cells[2].textContent,"
            " Number(tr.cells[4].dataset.value),"
            " tr.cells[0].querySelector('a').getAttribute('href')]);"
        )
    }
    for workflow in seed.BACKDATED:
        runs = seed.expected_ids(board, workflow=workflow)
        completed = seed.expected_ids(board, workflow=workflow, statuses=("completed",))
        failed = seed.expected_ids(board, workflow=workflow, statuses=seed.FAILED)
        count, success, p95, href = rows[workflow]
        assert count == len(runs), workflow
        assert success == f"{100 * len(completed) / (len(completed) + len(failed)):.1f} %"
        durations = seed.expected_durations(board, workflow)
        true_p95 = durations[int(0.95 * (len(durations) - 1))]
        assert true_p95 * 0.99 <= p95 <= true_p95 * 1.13, (workflow, p95, true_p95)
        assert href == f"#/runs?workflow={workflow}"

    failing = dict(
        page.js(
            "return Array.from(document.querySelectorAll('#ov-failing tr')).map(tr =>"
            " [tr.dataset.key, Number(tr.cells[2].textContent)]);"
        )
    )
    charge = wf_name("charge")
    assert failing[charge] == seed.expected_task_failures(board, charge) > 0
    slowest = page.js(
        "return Array.from(document.querySelectorAll('#ov-slowest tr'))"
        ".map(tr => Number(tr.cells[3].dataset.value));"
    )
    assert slowest and slowest == sorted(slowest, reverse=True)

    queue = page.js(
        "const tr = document.querySelector('#ov-queues tr[data-key=\"mail\"]');"
        " return [tr.cells[1].textContent, tr.cells[2].textContent, tr.cells[3].textContent,"
        " tr.cells[4].textContent, tr.cells[5].textContent];"
    )
    queued, running = seed.expected_queue(board, seed.QUEUE)
    assert queue[:4] == [str(queued), str(running), "2", "1"] and queue[4] != "—"
    schedule = board.engine.backend.get_schedule(seed.SCHEDULE)
    assert schedule is not None
    title = page.find(f'#ov-schedules tr[data-key="{seed.SCHEDULE}"] td:nth-child(3)')
    next_at = title.get_attribute("title")
    assert next_at is not None
    assert abs(seed.epoch(next_at) - schedule.next_fire_at) < 1


def wf_name(function: str) -> str:
    from tests.browser import dashboard_app as wf

    return str(getattr(wf, function).name)


def test_clicking_a_count_lists_exactly_its_runs(page: Page, board: Dashboard) -> None:
    """The failed count opens the list of failed runs created since the counts' window."""
    open_overview(page)
    since = page.attribute("#ov-since", "title")
    assert since is not None
    page.click('#ov-counts a[data-status="failed"]')
    page.wait_js("location.hash.startsWith('#/runs?status=failed')", "the runs list")
    expected = seed.expected_ids(board, statuses=("failed",), since=seed.epoch(since))
    assert listed(page) == expected and expected
    assert page.attribute("#nav-runs", "aria-current") == "page"
    assert page.js("return document.querySelector('#filters').elements.status.value") == "failed"


def test_clicking_a_bar_lists_exactly_its_runs(page: Page, board: Dashboard) -> None:
    """The hourly chart's tallest failed bar opens the list of its bucket's failed, dead
    and timed out runs; a per-minute started bar, reached by keyboard, all of its runs."""
    open_overview(page)
    failed = [bar for bar in bars(page, "#ov-hours") if bar["series"] == "failed"]
    tallest = max(failed, key=lambda bar: bar["value"])
    selector = f'#ov-hours a.bar[data-series="failed"][data-at="{tallest["at"]}"]'
    page.click(selector)
    page.wait_js("location.hash.startsWith('#/runs?')", "the runs list")
    start = seed.epoch(tallest["at"])
    expected = seed.expected_ids(board, statuses=seed.FAILED, since=start, until=start + 3600)
    assert listed(page) == expected and len(expected) == tallest["value"] > 0

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    open_overview(page)
    started = [bar for bar in bars(page, "#ov-minutes") if bar["series"] == "started"]
    busiest = max(started, key=lambda bar: bar["value"])
    index = started.index(busiest)
    # the chart's one Tab stop is its newest started bar; the arrows go back in time
    focused = page.js(
        "document.querySelector('#ov-minutes a.bar[tabindex=\"0\"]').focus();"
        " return document.activeElement.dataset.at;"
    )
    assert focused == started[-1]["at"]
    # Keys go to whatever has the focus, and the focus is read in one script: the page
    # redraws its charts now and then (keeping the focused bar focused), which would
    # leave a held element reference stale.
    for _ in range(len(started) - 1 - index):
        ActionChains(page.driver).send_keys(Keys.ARROW_LEFT).perform()
    now_focused = page.js(
        "const a = document.activeElement; return [a.dataset.at, a.dataset.series];"
    )
    assert now_focused == [busiest["at"], "started"]
    ActionChains(page.driver).send_keys(Keys.ENTER).perform()
    page.wait_js("location.hash.startsWith('#/runs?')", "the runs list")
    start = seed.epoch(busiest["at"])
    assert listed(page) == seed.expected_ids(board, since=start, until=start + 60)


def test_tab_reaches_each_chart_once(page: Page) -> None:
    """Tabbing through the page stops on one bar per chart, not on hundreds."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    open_overview(page)
    page.js("document.activeElement.blur(); window.scrollTo(0, 0);")
    stops = []
    for _ in range(26):  # the top bar, 11 counts, 2 cards, then the charts
        ActionChains(page.driver).send_keys(Keys.TAB).perform()
        stops.append(
            page.js(
                "const a = document.activeElement; return a.closest('svg.chart') ?"
                " a.closest('.chart-box').id : a.tagName;"
            )
        )
    assert stops.count("ov-minutes") == 1 and stops.count("ov-hours") == 1, repr(stops)
    assert stops.index("ov-hours") == stops.index("ov-minutes") + 1


def test_a_focused_count_keeps_the_focus_when_the_counts_change(
    page: Page, board: Dashboard
) -> None:
    """A run completing while the completed count has the keyboard focus redraws the
    counts with its new number, and the focus stays on that count, not on the page."""
    from tests.browser import dashboard_app as wf

    count = '#ov-counts a.count[data-status="completed"]'
    open_overview(page)
    before = page.js(
        "const a = document.querySelector(arguments[0]); a.focus();"
        " return document.activeElement === a ? a.dataset.count : null;",
        count,
    )
    assert before is not None, "the count did not take the focus"
    run_id = f"order-focused-{before}"
    board.engine.execute_call(wf.fulfil.bind(run_id), run_id=run_id)
    since = page.attribute("#ov-since", "title")
    expected = seed.expected_status_count(board, "completed", since)
    # the run's child completes first: a refresh may show that one alone for a while
    page.wait_js(
        f"document.querySelector('{count} strong').textContent === '{expected}'",
        "the completed count to be the database's",
    )
    status, shown, text, href = page.js(
        "const a = document.activeElement; return [a.matches(arguments[0]) ?"
        " a.dataset.status : a.tagName, a.dataset.count,"
        " a.querySelector('strong')?.textContent, a.getAttribute('href')];",
        count,
    )
    assert status == "completed", f"the focus fell to {status}"
    assert shown == text == str(expected) and expected != int(before)
    assert href.startswith("#/runs?status=completed&since=")


@pytest.mark.parametrize(
    ("table", "key", "query"),
    [("ov-workflows", "shop.checkout", "workflow"), ("ov-queues", seed.QUEUE, "queue")],
    ids=["workflow", "queue"],
)
def test_a_focused_name_keeps_the_focus_when_the_tables_are_redrawn(
    page: Page, board: Dashboard, table: str, key: str, query: str
) -> None:
    """A run completing while a workflow's or a queue's name has the keyboard focus
    redraws the overview, its tables too, and the focus stays on that link, which
    still names its workflow or queue and lists its runs."""
    from tests.browser import dashboard_app as wf

    link = f'#{table} tr[data-key="{key}"] a'
    count = '#ov-counts a.count[data-status="completed"]'
    open_overview(page)
    before = page.attribute(count, "data-count")
    page.focus(link)
    run_id = f"order-focused-{table}-{before}"
    board.engine.execute_call(wf.fulfil.bind(run_id), run_id=run_id)
    page.wait_js(
        f"document.querySelector('{count}').dataset.count !== '{before}'", "the page to redraw"
    )
    assert page.focused() == "same"
    assert page.text(link) == key
    href = page.js("return document.querySelector(arguments[0]).getAttribute('href');", link)
    assert href == f"#/runs?{query}={key}"


def test_old_filter_links_land_on_the_filtered_runs_list(page: Page, board: Dashboard) -> None:
    """#/?status=dead (the runs list's old address) redirects to #/runs?status=dead."""
    page.driver.get(f"{board.url}/#/?status=dead")
    page.wait_js("location.hash === '#/runs?status=dead'", "the redirect")
    assert listed(page) == seed.expected_ids(board, statuses=("dead",))


def test_dark_mode_follows_the_system(page: Page) -> None:
    """With the system in dark mode the page's background turns dark, and back."""
    background = "return getComputedStyle(document.documentElement).backgroundColor"
    open_overview(page)
    light = page.js(background)
    try:
        page.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        )
        dark = page.js(background)
        fill = page.js(
            "return getComputedStyle(document.querySelector('#ov-hours a.bar.series-failed"
            " .fill')).fill"
        )
    finally:
        page.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert light == "rgb(247, 248, 250)"
    assert dark != light and sum(int(c) for c in dark[4:-1].split(",")) < 150
    assert fill == "rgb(230, 159, 0)"  # Okabe-Ito orange: failed, on dark


OVERFLOW = """
const width = document.documentElement.clientWidth;
const scrolls = (node) => {
  for (let up = node.parentElement; up; up = up.parentElement) {
    const style = getComputedStyle(up);
    const scroller = ['auto', 'scroll'].includes(style.overflowX);
    if (scroller && up.scrollWidth > up.clientWidth) return true;
  }
  return false;
};
const out = [];
for (const node of document.querySelectorAll('body *')) {
  const box = node.getBoundingClientRect();
  if (box.width > 0 && (box.right > width + 1 || box.left < -1) && !scrolls(node)) {
    out.push(node.tagName + '#' + node.id + '.' + node.getAttribute('class'));
  }
}
return [document.documentElement.scrollWidth <= width, out.slice(0, 5)];
"""


def at_size(
    page: Page, fragment: str, ready: str, width: int = 390, height: int = 844
) -> list[Any]:
    page.driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 700},
    )
    try:
        page.open(fragment)
        page.wait_js(ready, f"{fragment} to draw")
        return list(page.js(OVERFLOW))
    finally:
        page.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.parametrize(
    ("fragment", "ready"),
    [
        ("#/", "document.querySelectorAll('#ov-hours a.bar').length > 0"),
        ("#/workflows", "document.querySelectorAll('#workflows-body tr').length > 0"),
        ("#/runs", "document.querySelectorAll('#runs-body tr').length > 0"),
        ("#/runs/order-0", "document.querySelectorAll('#history-body tr').length > 0"),
        ("#/queues", "document.querySelectorAll('#queues-body tr').length > 0"),
        ("#/schedules", "document.querySelectorAll('#schedules-body tr').length > 0"),
    ],
)
def test_nothing_overflows_a_phone_screen(page: Page, fragment: str, ready: str) -> None:
    """At 390x844 on every page with a table, only scroll containers (wide tables) are
    wider than the screen."""
    fits, overflowing = at_size(page, fragment, ready)
    assert fits and overflowing == [], overflowing


def test_a_laptop_screen_shows_the_overview_without_scrolling_sideways(page: Page) -> None:
    """At 1366x768 nothing is wider than the screen, tables included."""
    ready = "document.querySelectorAll('#ov-hours a.bar').length > 0"
    fits, overflowing = at_size(page, "#/", ready, 1366, 768)
    assert fits and overflowing == [], overflowing
