/* The page of one run (#/runs/<id>): header, actions (pause, resume, cancel, retry),
   the event form, input/output/error, the properties it published (state), the graph,
   the timeline, the history (marking where the state changed, and a "re-run from
   here" button on each step: a fork), the actions and events recorded, and the
   run's streams, live (streams.js). */

import {
  $, cells, chip, confirmAction, el, flowLink, formatDuration, formatTime, notice, pretty,
  rememberName, runHref, runLink, setFacts, storedName, syncRows, timeCell, updateChildren,
} from "./dom.js";
import { GraphView } from "./graph.js";
import { conditionalGet, getJSON, post, session } from "./http.js";
import { openPanel, refreshPanel } from "./panel.js";
import { streamsView } from "./streams.js";
import { drawTimeline } from "./timeline.js";
import { wireEventForm } from "./eventform.js";

/* The workflows of a process flow and of one launch of its command tasks. */
const FLOW = "durable.flow";
const FLOW_NODE = "durable.flow.node";
const FINISHED = new Set(["completed", "failed", "cancelled", "dead", "timed_out", "continued"]);
/* The statuses a run can be paused in (unless it is being cancelled). */
const PAUSABLE = new Set(["queued", "running", "waiting"]);

/* Mount the page of run *runId* into #view; refreshNow() asks for a refresh at once. */
export function runPage(runId, refreshNow) {
  $("view").replaceChildren($("run-page").content.cloneNode(true));
  const base = "api/v1/runs/" + encodeURIComponent(runId);
  const get = conditionalGet();
  // layout: the last Graph; detail: the last RunDetail (+ history, actions, events)
  const page = { layout: null, detail: null, lastText: "", refresh };
  page.graph = new GraphView($("graph-box"), (nodeId) => openPanel(page, nodeId));
  $("run-crumb").textContent = runId;
  $("run-id").textContent = runId;

  async function act(question, action, done) {
    const answer = await confirmAction(question, true);
    if (!answer) return;
    try {
      notice(done(await post(`${base}/${action}`, answer)));
    } catch (error) {
      notice(error.message, "error");
    }
    refreshNow();
  }
  $("cancel-run").addEventListener("click", () => act(
    `Cancel run ${runId}? Work in progress stops at its next durable call.`, "cancel",
    () => "Cancellation requested."));
  $("pause-run").addEventListener("click", () => act(
    `Pause run ${runId}? It stops at its next durable call (with its children) until resumed.`,
    "pause", (answer) => answer.status === "paused" ? "Paused." : "Pause requested."));
  $("resume-run").addEventListener("click", () => act(
    page.detail && page.detail.status === "cancelled"
      ? `Resume cancelled run ${runId}? It goes on from where the cancellation reached ` +
        "its code, as if it had not been cancelled."
      : `Resume run ${runId}? It goes on from where it stopped.`,
    "resume", (answer) => `Resumed (${answer.status}).`));
  $("retry-run").addEventListener("click", () => act(
    `Retry run ${runId}? Completed steps are kept; the failed ones run again.`, "retry",
    (answer) => `Queued again; reopened positions: ${answer.reopened.join(", ") || "none"}.`));
  // "re-run from here": a new run copies the finished steps before this position and
  // runs on from it with today's code (POST .../fork); the page moves to the new run.
  $("history-body").addEventListener("click", async (event) => {
    const button = event.target.closest("button.fork-step");
    if (!button) return;
    const position = Number(button.getAttribute("data-position"));
    const answer = await confirmAction(`Re-run run ${runId} from step #${position}? A new ` +
      `run copies the finished steps before #${position} (they do not run again) and runs ` +
      `from #${position} on with the workers' code. This run is not changed.`, true);
    if (!answer) return;
    try {
      const forked = await post(`${base}/fork`, { from: position, ...answer });
      notice(`Forked from step #${position}: new run ${forked.run.id}.`);
      window.location.hash = runHref(forked.run.id);
    } catch (error) {
      notice(error.message, "error");
    }
  });
  const eventForm = wireEventForm(runId, base, refreshNow);
  const refreshStreams = streamsView(base);

  async function refresh() {
    const [detail, layout] = await Promise.all([get(base), get(base + "/graph")]);
    const text = JSON.stringify(detail.data);
    const news = text !== page.lastText;
    if (news) {
      page.lastText = text;
      page.detail = detail.data;
      renderRun(page.detail, eventForm);
    }
    // the steps add progress bars and timeouts to the boxes: repaint when either moved
    if (layout.changed || !page.layout || news) {
      page.layout = layout.data;
      page.graph.update(layout.data, page.detail.history || []);
    }
    refreshPanel(page);
    await refreshStreams();
  }
  return page;
}

/* Redrawn whenever the run changed: its links (facts, waiting, children, history) are
   updated in place (setFacts, updateChildren, syncRows), so one with the keyboard focus
   keeps it. */
function renderRun(run, showEventForm) {
  chip($("run-status"), run.status);
  setFacts($("run-facts"), [
    ["Workflow", run.workflow],
    // a process flow, or one launch of a task of one: its graph is on the flow's page
    ["Flow", run.workflow === FLOW ? flowLink(run.id)
      : run.workflow === FLOW_NODE && run.parent_id ? flowLink(run.parent_id) : null],
    ["Queue", `${run.queue} (priority ${run.priority})`],
    ["Created", formatTime(run.created_at)],
    ["Started", formatTime(run.started_at)],
    ["Finished", run.finished_at && formatTime(run.finished_at)],
    ["Duration", formatDuration(run.duration)],
    ["Deadline", run.deadline_at && formatTime(run.deadline_at)],
    ["Recoveries", run.recoveries || null],
    ["Cancel", run.cancel_requested && !FINISHED.has(run.status) ? "requested" : null],
    ["Pause", run.pause_requested && !FINISHED.has(run.status) ? "requested" : null],
    ["Parent", run.parent_id && runLink(run.parent_id)],
    ["Forked from", run.origin && runLink(run.origin)],
    // continue_as_new: the chain goes on in its successor
    ["Continued as", run.continued_as && runLink(run.continued_as)],
    ["Continues", run.continues && runLink(run.continues)],
  ]);
  renderWaiting(run);
  renderChildren(run.children || []);
  $("run-input").textContent = pretty(run.input);
  $("run-output-box").hidden = run.status !== "completed";
  $("run-output").textContent = pretty(run.output);
  $("run-error-box").hidden = !run.error;
  if (run.error) {
    $("run-error").textContent = `${run.error.type}: ${run.error.message}`;
    $("run-traceback").textContent = run.error.traceback || "(no traceback recorded)";
  }
  $("cancel-run").hidden = session.read_only || FINISHED.has(run.status);
  // a run asked to pause offers Resume (withdraw the request), not Pause again
  $("pause-run").hidden = session.read_only || !PAUSABLE.has(run.status) ||
    run.cancel_requested || run.pause_requested;
  // a cancelled run resumes from where the cancellation reached its code
  $("resume-run").hidden = session.read_only || !(run.status === "paused" ||
    run.status === "cancelled" || (run.pause_requested && !FINISHED.has(run.status)));
  // not timed_out: its deadline has passed, so a retried run would time out at once
  $("retry-run").hidden = session.read_only || !["failed", "dead"].includes(run.status);
  showEventForm(run.waiting && run.waiting.kind === "event" ? run.waiting.event : null);
  renderPairs("run-state-box", "state-body", run.state || {});
  renderPairs("run-attributes-box", "attributes-body", run.attributes || {});
  drawTimeline($("timeline-box"), run);
  const history = run.history || [];
  const changes = stateChanges(history);
  $("history-body").closest("table").classList.toggle("no-state", changes.size === 0);
  syncRows($("history-body"), history, (step) => step.position,
    (row, step) => fillStep(row, step, changes.get(step.position)));
  listRows("actions", run.actions || [], (action) => action.id, fillAction);
  listRows("events", run.events || [], (sent) => sent.id, fillEvent);
}

function renderWaiting(run) {
  const box = $("run-waiting");
  const waiting = run.waiting;
  if (run.status === "paused") {
    // what it waited for (if anything) is kept, and waited for again once resumed
    box.hidden = false;
    box.textContent = "Paused: nothing runs until it is resumed." +
      (waiting && waiting.kind === "event" ? ` It waits for the event "${waiting.event}".` : "");
    return;
  }
  box.hidden = !waiting || run.status !== "waiting";
  if (box.hidden) return;
  const until = waiting.until ? ` (until ${formatTime(waiting.until)})` : "";
  if (waiting.kind === "event") {
    box.textContent = `Waiting for the event "${waiting.event}"${until}.`;
  } else if (waiting.kind === "run" && waiting.run) {
    updateChildren(box, "Waiting for run ", runLink(waiting.run), ` to finish${until}.`);
  } else {
    box.textContent = `Sleeping until ${formatTime(waiting.until)}.`;
  }
}

function renderChildren(children) {
  const box = $("run-family");
  box.hidden = children.length === 0;
  const parts = [el("span", children.length === 1 ? "Child run: " : "Child runs: ")];
  children.forEach((id, index) => {
    if (index) parts.push(", ");
    parts.push(runLink(id));
  });
  updateChildren(box, ...parts);
}

/* The run's properties as last stored, or its attributes: one row each, in the box
   *boxId* (hidden when there are none). */
function renderPairs(boxId, bodyId, values) {
  const entries = Object.entries(values);
  $(boxId).hidden = entries.length === 0;
  syncRows($(bodyId), entries, ([key]) => key, (row, [key, value]) => {
    if (row.cells.length === 0) row.append(el("th", null, { scope: "row" }), el("td"));
    const [name, shown] = Array.from(row.cells);
    name.textContent = key;
    shown.textContent = JSON.stringify(value);
    shown.setAttribute("class", "mono");
  });
}

/* position -> what the step's snapshot changed since the one before it ("key=value"
   as JSON, "-key" for a property gone), for the steps that stored one. */
function stateChanges(history) {
  const changes = new Map();
  let before = {};
  for (const step of history) {
    const state = step.state;
    if (!state || typeof state !== "object") continue;
    const changed = Object.entries(state)
      .filter(([key, value]) => !(key in before) ||
        JSON.stringify(before[key]) !== JSON.stringify(value))
      .map(([key, value]) => `${key}=${JSON.stringify(value)}`);
    for (const key of Object.keys(before)) if (!(key in state)) changed.push(`-${key}`);
    changes.set(step.position, changed.join(", ") || "(unchanged)");
    before = state;
  }
  return changes;
}

/* syncRows for a table that gives way to a "none yet" line when it is empty. */
function listRows(name, items, keyOf, fill) {
  const body = $(`${name}-body`);
  syncRows(body, items, keyOf, fill);
  body.closest("table").hidden = items.length === 0;
  $(`${name}-empty`).hidden = items.length > 0;
}

function fillStep(row, step, changed) {
  const [position, kind, name, status, attempts, started, duration, state, actions] =
    cells(row, 9);
  position.textContent = step.position;
  kind.textContent = step.kind;
  if (step.child_id) updateChildren(name, step.name + " → ", runLink(step.child_id));
  else name.textContent = step.name;
  if (!status.firstChild) status.append(el("span"));
  chip(status.firstChild, step.status);
  attempts.textContent = step.attempts;
  timeCell(started, step.started_at);
  duration.textContent = formatDuration(step.duration);
  // where the step's code changed the run's properties: what changed (all of them in
  // the tooltip)
  state.setAttribute("class", changed === undefined ? "state-col" : "state-col mono changed");
  state.textContent = changed === undefined ? "" : changed;
  if (changed === undefined) state.removeAttribute("title");
  else state.setAttribute("title", JSON.stringify(step.state));
  if (!actions.firstChild) {
    actions.setAttribute("class", "row-actions");
    actions.append(el("button", "Re-run from here", { type: "button", class: "plain fork-step",
      "data-position": String(step.position),
      title: "Fork: a new run that keeps the steps before this one and runs from here" }));
  }
  actions.firstChild.hidden = session.read_only;
}

function fillAction(row, action) {
  const [at, what, who, detail] = cells(row, 4);
  timeCell(at, action.at);
  what.textContent = action.action;
  who.textContent = action.actor || "—";
  const hasDetail = Object.keys(action.detail || {}).length > 0;
  detail.textContent = hasDetail ? JSON.stringify(action.detail) : "";
  detail.setAttribute("class", "mono");
}

function fillEvent(row, sent) {
  const [at, name, sender, taken] = cells(row, 4);
  timeCell(at, sent.sent_at);
  name.textContent = sent.name;
  sender.textContent = sent.sender || "—";
  const position = sent.consumed_position ?? null;
  taken.textContent = position === null ? "not yet" : `#${position}`;
}
