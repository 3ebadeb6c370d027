/* The workflows page (#/workflows): every workflow and task name seen in the last 7
   days with its runs (a task's: calls), success rate, p50/p95 duration, last failure
   and a sparkline of the last 24 hours. Each column sorts by a button in its header
   (click or keyboard; aria-sort says the order); a workflow's name opens the runs list
   filtered to it. It reads api/v1/workflows and acts on nothing. */

import { $, cells, el, syncRows, timeCell, updateChildren } from "./dom.js";
import { sparkline } from "./charts.js";
import { durationCell, successText, workflowLink } from "./overview.js";
import { conditionalGet } from "./http.js";

/* Kept while the tab lives, so coming back finds the same order. */
const order = { key: "name", ascending: true };

/* Mount the page into #view. */
export function workflowsPage() {
  $("view").replaceChildren($("workflows-page").content.cloneNode(true));
  const get = conditionalGet();
  let items = [];
  let drawn = false;

  const draw = () => {
    const sorted = sortItems(items, order.key, order.ascending);
    syncRows($("workflows-body"), sorted, (item) => `${item.kind}:${item.name}`, fillRow);
    $("workflows-table").hidden = items.length === 0;
    $("workflows-empty").hidden = items.length > 0;
    for (const th of $("workflows-table").tHead.rows[0].cells) {
      if (th.getAttribute("data-key") === order.key) {
        th.setAttribute("aria-sort", order.ascending ? "ascending" : "descending");
      } else {
        th.removeAttribute("aria-sort");
      }
    }
  };

  $("workflows-table").tHead.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    const key = button.closest("th").getAttribute("data-key");
    // a new column starts in its natural order: names A to Z, figures largest first
    if (order.key === key) order.ascending = !order.ascending;
    else Object.assign(order, { key, ascending: key === "name" || key === "kind" });
    draw();
  });

  async function refresh() {
    const { data, changed } = await get("api/v1/workflows");
    if (!changed && drawn) return;
    drawn = true;
    items = data.items.map((item) => ({
      ...item, spark_total: (item.spark || []).reduce((sum, value) => sum + value, 0),
    }));
    draw();
  }
  return { refresh };
}

/* items by key; missing values (no duration, no failure) last in either order, ties
   by kind and name. */
export function sortItems(items, key, ascending) {
  const sign = ascending ? 1 : -1;
  const tie = (a, b) => compare(a.kind, b.kind) || compare(a.name, b.name);
  return [...items].sort((a, b) => {
    const x = a[key];
    const y = b[key];
    const missingX = x === null || x === undefined;
    const missingY = y === null || y === undefined;
    if (missingX || missingY) return missingX === missingY ? tie(a, b) : missingX ? 1 : -1;
    const compared = typeof x === "string" ? compare(x, y) : x - y;
    return compared === 0 ? tie(a, b) : sign * compared;
  });
}

/* By code point, as `sorted` and `durable stats` order names. */
function compare(x, y) {
  return x < y ? -1 : x > y ? 1 : 0;
}

function fillRow(row, item) {
  const [name, kind, runs, success, p50, p95, failure, spark] = cells(row, 8);
  row.setAttribute("data-kind", item.kind);
  row.setAttribute("data-name", item.name);
  // updated in place: a focused name keeps the focus when the page refreshes
  updateChildren(name, item.kind === "workflow" ? workflowLink(item.name)
    : el("span", item.name, { class: "mono" }));
  kind.textContent = item.kind;
  runs.textContent = String(item.runs);
  success.textContent = successText(item.success);
  durationCell(p50, item.p50_duration);
  durationCell(p95, item.p95_duration);
  timeCell(failure, item.last_failure_at);
  const what = item.kind === "workflow" ? "runs" : "calls";
  spark.replaceChildren(sparkline(item.spark || [], `${item.name}: ${what} per hour, last 24 hours`));
}
