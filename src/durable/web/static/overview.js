/* The overview (#/, the landing page): runs by status, runs started, completed and
   failed per minute over the last hour and per hour over the last 7 days, durations
   per workflow, the slowest and most failing tasks, queues, schedules, and the blocked
   and dead runs that need someone. Every figure that counts runs links to the runs
   list filtered to exactly those runs. It reads api/v1/overview and acts on nothing. */

import { $, cells, chip, el, formatDuration, syncRows, timeCell, updateChildren } from "./dom.js";
import { barChart } from "./charts.js";
import { conditionalGet } from "./http.js";

/* Statuses in the order shown; active ones count runs in that status now, the others
   runs created since counts_since that ended so. */
const ACTIVE = ["queued", "running", "waiting", "blocked", "paused"];
const ENDED = ["completed", "failed", "cancelled", "dead", "timed_out", "continued"];

/* Mount the page into #view. */
export function overviewPage() {
  $("view").replaceChildren($("overview-page").content.cloneNode(true));
  const get = conditionalGet();
  let drawn = false;

  async function refresh() {
    const { data, changed } = await get("api/v1/overview");
    if (!changed && drawn) return;
    drawn = true;
    drawCounts(data);
    barChart($("ov-minutes"), data.minutes, 60, "Runs started, completed and failed per minute, last hour");
    barChart($("ov-hours"), data.hours, 3600, "Runs started, completed and failed per hour, last 7 days");
    syncRows($("ov-workflows"), data.workflows, (w) => w.name, fillWorkflow);
    $("ov-workflows-empty").hidden = data.workflows.length > 0;
    syncRows($("ov-slowest"), data.slowest_tasks, (t) => t.name, fillSlowTask);
    syncRows($("ov-failing"), data.failing_tasks, (t) => t.name, fillFailingTask);
    $("ov-failing-empty").hidden = data.failing_tasks.length > 0;
    syncRows($("ov-queues"), data.queues, (q) => q.name, fillQueue);
    syncRows($("ov-schedules"), data.schedules, (s) => s.id, fillSchedule);
    $("ov-schedules-empty").hidden = data.schedules.length > 0;
  }
  return { refresh };
}

/* The runs list of one status: ended statuses are bounded to the counts' window. */
export function statusHref(status, since) {
  const query = new URLSearchParams({ status });
  if (ENDED.includes(status) && since) query.set("since", since);
  return "#/runs?" + query.toString();
}

/* The status counts, one li > a.count per status, in a fixed order: updated in place
   (updateChildren), so a count that has the keyboard focus keeps it when the page
   refreshes, where new nodes would drop it to the page. */
function drawCounts(data) {
  const items = [...ACTIVE, ...ENDED].map((status) => {
    const count = data.counts[status] ?? 0;
    const link = el("a", null, {
      href: statusHref(status, data.counts_since), class: "count", "data-status": status,
      "data-count": String(count),
    });
    const name = el("span");
    chip(name, status);
    link.append(el("strong", count), name);
    const item = el("li");
    item.append(link);
    return item;
  });
  updateChildren($("ov-counts"), ...items);
  timeCell($("ov-since"), data.counts_since);
  const blocked = data.blocked.count;
  $("ov-blocked").textContent = `${blocked} blocked ${blocked === 1 ? "run" : "runs"}`;
  $("ov-blocked").setAttribute("data-count", String(blocked));
  $("ov-advice").textContent = data.blocked.advice;
  $("ov-blocked-card").setAttribute("data-alert", String(blocked > 0));
  const dead = data.dead.count;
  $("ov-dead").textContent = `${dead} dead ${dead === 1 ? "run" : "runs"}`;
  $("ov-dead").setAttribute("data-count", String(dead));
  $("ov-dead-card").setAttribute("data-alert", String(dead > 0));
}

/* A duration, its exact seconds kept in data-value (the text is rounded). */
export function durationCell(td, seconds) {
  td.textContent = formatDuration(seconds);
  td.setAttribute("data-value", seconds === null || seconds === undefined ? "" : String(seconds));
}

export function successText(success) {
  return success === null || success === undefined ? "—" : `${success.toFixed(1)} %`;
}

/* A workflow's name, a link to the list of its runs. */
export function workflowLink(name) {
  return el("a", name, { href: "#/runs?" + new URLSearchParams({ workflow: name }), class: "mono" });
}

/* The fill* functions redraw a row at each refresh: a link goes through updateChildren,
   so one with the keyboard focus keeps it. */
function fillWorkflow(row, item) {
  const [name, runs, success, p50, p95, failure] = cells(row, 6);
  updateChildren(name, workflowLink(item.name));
  runs.textContent = String(item.runs);
  success.textContent = successText(item.success);
  durationCell(p50, item.p50_duration);
  durationCell(p95, item.p95_duration);
  timeCell(failure, item.last_failure_at);
}

function fillSlowTask(row, item) {
  const [name, runs, p50, p95] = cells(row, 4);
  name.setAttribute("class", "mono");
  name.textContent = item.name;
  runs.textContent = String(item.runs);
  durationCell(p50, item.p50_duration);
  durationCell(p95, item.p95_duration);
}

function fillFailingTask(row, item) {
  const [name, runs, failed, failure] = cells(row, 4);
  name.setAttribute("class", "mono");
  name.textContent = item.name;
  runs.textContent = String(item.runs);
  failed.textContent = String(item.failed);
  timeCell(failure, item.last_failure_at);
}

function limitText(value) {
  return value === null || value === undefined ? "—" : String(value);
}

function fillQueue(row, queue) {
  const [name, queued, running, limit, keyLimit, oldest] = cells(row, 6);
  updateChildren(name, el("a", queue.name, {
    href: "#/runs?" + new URLSearchParams({ queue: queue.name }), class: "mono",
  }));
  queued.textContent = String(queue.queued);
  running.textContent = String(queue.running);
  limit.textContent = limitText(queue.concurrency);
  keyLimit.textContent = limitText(queue.key_concurrency);
  oldest.textContent = formatDuration(queue.oldest_queued_age);
}

function fillSchedule(row, schedule) {
  const [id, workflow, next] = cells(row, 3);
  id.setAttribute("class", "mono");
  id.textContent = schedule.id;
  workflow.textContent = schedule.workflow;
  if (schedule.paused || schedule.orphaned) {
    const state = el("span");
    chip(state, schedule.orphaned ? "orphaned" : "paused");
    next.replaceChildren(state);
    next.removeAttribute("title");
  } else {
    next.replaceChildren();
    timeCell(next, schedule.next_fire_at);
  }
}
