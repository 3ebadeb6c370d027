/* The page of one process flow (#/flows/<id>): its status, the DAG of its tasks drawn
   from its file (boxes coloured by status, arrows for dependencies, live), and the
   panel of the task whose box is clicked (see flowpanel.js). A nested flow's box opens
   into its own graph (double-click, or the link in its panel).

   For the browser test and the benchmark, the graph box records how long the first
   drawing took: data-rendered-ms from this page being opened to the boxes painted,
   data-navigation-ms the same from the document's navigation start. */

import {
  $, cells, chip, el, flowHref, flowLink, formatTime, isoTime, runLink, setFacts, syncRows,
  updateChildren,
} from "./dom.js";
import { FlowGraph } from "./flowgraph.js";
import { FlowPanel } from "./flowpanel.js";
import { conditionalGet } from "./http.js";

const ORDER = ["not_ready", "ready", "waiting", "running", "finished", "failed", "killed"];

/* Mount the page of flow *flowId* into #view; *task* (or null) is the task whose panel
   opens first (a human task's notification links to its form). */
export function flowPage(flowId, task, refreshNow) {
  const opened = performance.now();
  $("view").replaceChildren($("flow-page").content.cloneNode(true));
  const base = "api/v1/flows/" + encodeURIComponent(flowId);
  const get = conditionalGet();
  const page = { flow: null, refresh };
  const graph = new FlowGraph($("flow-graph-box"), (name) => panel.show(name, page.flow));
  const panel = new FlowPanel(base, graph, refreshNow);
  let first = task;
  $("flow-crumb").textContent = flowId;
  $("flow-id").textContent = flowId;
  $("flow-fit").addEventListener("click", () => {
    const fit = graph.root.classList.toggle("fit");
    $("flow-fit").setAttribute("aria-pressed", String(fit));
    $("flow-fit").textContent = fit ? "Actual size" : "Fit to width";
  });
  $("flow-graph-box").addEventListener("dblclick", (event) => {
    const box = event.target.closest("g.task.kind-flow");
    const nested = box && page.flow.tasks.find((t) => t.name === box.getAttribute("data-name"));
    if (nested && nested.run_id) window.location.hash = flowHref(nested.run_id);
  });

  async function refresh() {
    const { data, changed } = await get(base);
    if (changed || !page.flow) {
      page.flow = data;
      renderFlow(data);
      const started = performance.now();
      if (graph.update(data) && !$("flow-graph-box").hasAttribute("data-rendered-ms")) {
        markRendered(opened, started);
      }
    }
    if (first && page.flow.tasks.some((t) => t.name === first)) {
      panel.show(first, page.flow);
      graph.reveal(first);
      first = null;
    } else {
      panel.render(page.flow); // running times and logs move on even when statuses do not
    }
  }
  return page;
}

/* After the next paint (two animation frames), note how long the drawing took. */
function markRendered(opened, started) {
  const box = $("flow-graph-box");
  requestAnimationFrame(() => requestAnimationFrame(() => {
    const now = performance.now();
    box.setAttribute("data-build-ms", (now - started).toFixed(1));
    box.setAttribute("data-rendered-ms", (now - opened).toFixed(1));
    box.setAttribute("data-navigation-ms", now.toFixed(1));
  }));
}

function renderFlow(flow) {
  chip($("flow-status"), flow.status);
  $("flow-name").textContent = flow.name;
  setFacts($("flow-facts"), [
    ["Flow", flow.name],
    ["File", flow.source],
    ["At most", flow.max_running ? `${flow.max_running} tasks at once` : null],
    ["Nested in", flow.parent && flowLink(flow.parent)],
    ["Run", runLink(flow.id)],
    ["Tasks", countsText(flow.tasks)],
  ]);
  $("flow-stuck").hidden = !flow.stuck;
}

/* "3 finished · 1 failed · 2 not ready", in the order a task goes through them. */
export function countsText(tasks) {
  const counts = new Map();
  for (const task of tasks) counts.set(task.status, (counts.get(task.status) || 0) + 1);
  return ORDER.filter((status) => counts.has(status))
    .map((status) => `${counts.get(status)} ${status.replace("_", " ")}`).join(" · ") || "none";
}

/* The list of flows (#/flows), newest first, a page at a time. */
export function flowsPage(refreshNow) {
  $("view").replaceChildren($("flows-page").content.cloneNode(true));
  const get = conditionalGet();
  let cursors = [null];
  let nextCursor = null;
  $("flows-next").addEventListener("click", () => {
    cursors.push(nextCursor);
    refreshNow();
  });
  $("flows-first").addEventListener("click", () => {
    cursors = [null];
    refreshNow();
  });

  async function refresh() {
    const query = new URLSearchParams({ limit: "50" });
    const cursor = cursors[cursors.length - 1];
    if (cursor) query.set("cursor", cursor);
    const { data } = await get("api/v1/flows?" + query.toString());
    syncRows($("flows-body"), data.items, (flow) => flow.id, fillFlow);
    $("flows-table").hidden = data.items.length === 0;
    $("flows-empty").hidden = data.items.length > 0;
    nextCursor = data.next_cursor;
    $("flows-next").disabled = !nextCursor;
    $("flows-first").disabled = cursors.length === 1;
  }
  return { refresh };
}

/* One row of the flows list, updated in place at each refresh (syncRows,
   updateChildren): a flow's link with the keyboard focus keeps it. */
function fillFlow(row, flow) {
  row.setAttribute("data-status", flow.status);
  const status = el("span");
  chip(status, flow.status);
  if (flow.stuck) {
    status.textContent = `${flow.status}, stuck`;
    status.setAttribute("title", "A task failed and nothing else can run: restart it.");
  }
  const counts = Object.entries(flow.counts || {}).filter(([, n]) => n > 0)
    .sort(([a], [b]) => ORDER.indexOf(a) - ORDER.indexOf(b))
    .map(([name, n]) => `${n} ${name.replace("_", " ")}`).join(" · ");
  const parts = [status, flowLink(flow.id), flow.name, counts || "—",
    formatTime(isoTime(flow.created_at)), formatTime(isoTime(flow.finished_at))];
  cells(row, parts.length).forEach((td, index) => updateChildren(td, parts[index]));
}
