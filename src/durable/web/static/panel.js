/* The side panel of one box of the graph: the step's input, output or error with
   traceback, attempts and timings, and the task's record across runs.

   It shows what the run page last fetched, so it follows the run as the page polls. */

import { $, formatDuration, formatTime, pretty, runHref, setFacts } from "./dom.js";
import { getJSON } from "./http.js";

/* page: the run page the panel belongs to ({layout, detail, graph}); nodeId: its box. */
const shown = { page: null, nodeId: null, stats: new Map() };

export function openPanel(page, nodeId) {
  shown.page = page;
  shown.nodeId = nodeId;
  shown.stats.clear(); // picking a box asks for fresh numbers
  $("panel").hidden = false;
  renderPanel();
}

export function closePanel() {
  if (shown.page) shown.page.graph.select(null);
  shown.page = null;
  shown.nodeId = null;
  $("panel").hidden = true;
}

/* Redraw the panel if it shows a box of *page* (after the page fetched news). */
export function refreshPanel(page) {
  if (shown.page === page) renderPanel();
}

export function startPanel() {
  $("panel-close").addEventListener("click", closePanel);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("panel").hidden && !$("confirm").open) closePanel();
  });
}

function renderPanel() {
  const { page, nodeId } = shown;
  const node = page.layout && page.layout.nodes.find((candidate) => candidate.id === nodeId);
  if (!node) {
    closePanel(); // the box is gone (the run was retried and the step reopened)
    return;
  }
  page.graph.select(node.id);
  const history = (page.detail && page.detail.history) || [];
  const step = history.find((candidate) => candidate.position === node.position);
  $("panel").setAttribute("data-position", node.position);
  $("panel-title").textContent = node.name || node.label;
  setFacts($("panel-facts"), [
    ["Position", node.position],
    ["Kind", node.kind],
    ["State", node.state],
    ["Status", step ? step.status : "not recorded yet"],
    ["Timed out", step && step.timed_out && "yes (TaskTimeout)"],
    ["Attempts", step && step.attempts],
    ["Progress", step && typeof step.progress === "number" &&
      `${Math.round(step.progress * 100)} %`],
    ["Heartbeat", step && step.heartbeat_at && formatTime(step.heartbeat_at)],
    ["Started", step && formatTime(step.started_at)],
    ["Finished", step && step.finished_at && formatTime(step.finished_at)],
    ["Duration", step && formatDuration(step.duration)],
    ["Elapsed", step && step.status === "running" && step.started_at &&
      formatDuration(Math.max(0, Date.now() - Date.parse(step.started_at)) / 1000)],
    ["Due", step && step.status !== "running" && step.wake_at && formatTime(step.wake_at)],
    // a running attempt of a task with heartbeat=: taken over if silent past this
    ["Heartbeat due by", step && step.status === "running" && step.wake_at &&
      formatTime(step.wake_at)],
  ]);
  const childId = node.child_id || (step && step.child_id);
  $("panel-child").hidden = !childId;
  if (childId) $("panel-child-link").setAttribute("href", runHref(childId));
  $("panel-input-box").hidden = !step;
  $("panel-output-box").hidden = !step || step.status !== "completed";
  $("panel-input").textContent = step ? pretty(step.input) : "";
  $("panel-output").textContent = step ? pretty(step.output) : "";
  const details = step ? step.details : null;
  $("panel-details-box").hidden = details === null || details === undefined;
  $("panel-details").textContent = pretty(details);
  const error = step && step.error;
  $("panel-error-box").hidden = !error;
  $("panel-error").textContent = error ? `${error.type}: ${error.message}` : "";
  $("panel-traceback").textContent = error ? error.traceback || "(no traceback recorded)" : "";
  renderStats(node);
}

async function renderStats(node) {
  const box = $("panel-stats-box");
  box.hidden = node.kind !== "task";
  if (box.hidden) return;
  let stat = shown.stats.get(node.name);
  if (!stat) {
    try {
      stat = await getJSON("api/v1/tasks/" + encodeURIComponent(node.name) + "/stats");
      shown.stats.set(node.name, stat);
    } catch (error) {
      setFacts($("panel-stats"), [["Unavailable", error.message]]);
      return;
    }
  }
  if (shown.nodeId !== node.id) return; // another box was picked meanwhile
  setFacts($("panel-stats"), [
    ["Runs", stat.runs],
    ["Success", stat.success === null ? "—" : `${stat.success.toFixed(1)} %`],
    ["Average", formatDuration(stat.avg_duration)],
    ["p95", formatDuration(stat.p95_duration)],
    ["Failures (24 h)", stat.failures_24h],
    ["Last failure", stat.last_failure_at && formatTime(stat.last_failure_at)],
  ]);
}
