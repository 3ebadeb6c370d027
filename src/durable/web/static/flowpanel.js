/* The side panel of one task of a flow (#/flows/<id>, a box clicked): what it runs and
   where, its attempts, times and exit code, how it did in earlier runs of the flow,
   the tail of its log, and what can be done to it: Restart (failed, finished or killed),
   Kill (running), and for a human task waiting for its answer, a form built from its
   fields with Done and Failed. Errors of the API (400, 409) are shown in the panel. */

import {
  $, chip, confirmAction, el, flowHref, formatDuration, formatTime, isoTime, pretty, runHref,
  setFacts,
} from "./dom.js";
import { getJSON, post, session } from "./http.js";

/* How much of a log the panel shows: its end. */
const LOG_TAIL = 64 * 1024;
const RESTARTABLE = new Set(["failed", "finished", "killed"]);

/* The panel of the flow page on screen (one at a time): Escape closes it. */
let current = null;
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && current && current.open && !$("confirm").open) current.close();
});

/* base: "api/v1/flows/<encoded id>"; graph: the page's FlowGraph; refreshNow(): ask
   the page to poll at once (after an action). */
export class FlowPanel {
  constructor(base, graph, refreshNow) {
    current = this;
    this.base = base;
    this.graph = graph;
    this.refreshNow = refreshNow;
    this.name = null; // the task shown
    this.task = null; // as last polled
    this.formFor = null; // the task and form the form's fields were built for
    this.logFor = null; // the status stamp the log was last fetched at
    $("flow-panel-close").addEventListener("click", () => this.close());
    $("task-restart").addEventListener("click", () => this.act("restart",
      `Restart task ${this.name}? It runs again, then every task that depends on it, in ` +
      "order; what the tasks before it produced is kept."));
    $("task-kill").addEventListener("click", () => this.act("kill",
      `Kill task ${this.name}? Its process gets SIGTERM, then SIGKILL after a grace; the ` +
      "task ends killed and what depends on it waits."));
    $("task-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.answer("finished");
    });
    $("task-failed").addEventListener("click", () => this.answer("failed"));
  }

  get open() {
    const panel = $("flow-panel");
    return panel !== null && !panel.hidden;
  }

  show(name, flow) {
    if (name !== this.name) {
      this.formFor = null;
      this.logFor = null;
      this.error("");
    }
    this.name = name;
    $("flow-panel").hidden = false;
    this.graph.select(name);
    this.render(flow);
  }

  close() {
    this.name = null;
    this.task = null;
    this.graph.select(null);
    $("flow-panel").hidden = true;
  }

  /* Redraw from the latest poll of the flow (a no-op when closed). */
  render(flow) {
    if (!this.name) return;
    const task = flow.tasks.find((candidate) => candidate.name === this.name);
    if (!task) {
      this.close(); // the flow no longer has this task
      return;
    }
    this.task = task;
    $("flow-panel").setAttribute("data-task", task.name);
    $("flow-panel").setAttribute("data-status", task.status);
    $("flow-panel-title").textContent = task.name;
    chip($("flow-panel-status"), task.status);
    renderFacts(task);
    this.renderLinks(flow, task);
    $("task-restart").hidden = session.read_only || !RESTARTABLE.has(task.status);
    $("task-kill").hidden = session.read_only || task.status !== "running" ||
      task.kind === "human";
    this.renderForm(task);
    $("task-data-box").hidden = task.data === null || task.data === undefined;
    $("task-data").textContent = pretty(task.data);
    $("task-error-box").hidden = !task.error;
    $("task-error").textContent = task.error || "";
    const history = task.history || {};
    setFacts($("task-history"), [
      ["Runs", String(history.runs ?? 0)],
      ["Success", history.success === null || history.success === undefined
        ? "—" : `${history.success} %`],
      ["Average", formatDuration(history.average)],
    ]);
    this.renderLog(task);
  }

  renderLinks(flow, task) {
    const nested = task.kind === "flow" && task.run_id;
    $("task-subflow").hidden = !nested;
    if (nested) $("task-subflow").setAttribute("href", flowHref(task.run_id));
    const launch = task.kind === "command" && task.run_id;
    $("task-run").hidden = !launch;
    if (launch) $("task-run").setAttribute("href", runHref(task.run_id));
  }

  /* The form of a human task waiting for its answer, built once per task and form so
     that a poll does not wipe what the user typed. */
  renderForm(task) {
    const waiting = task.kind === "human" && task.status === "waiting" && !session.read_only;
    $("task-form").hidden = !waiting;
    if (!waiting) {
      this.formFor = null;
      return;
    }
    const key = task.name + "\u0000" + JSON.stringify(task.form || {});
    if (key === this.formFor) return;
    this.formFor = key;
    $("task-form-assignee").textContent = task.assignee ? `Assigned to ${task.assignee}.` : "";
    const fields = Object.entries(task.form || {}).map(([name, type]) => formField(name, type));
    $("task-form-fields").replaceChildren(...fields);
    $("task-form-empty").hidden = fields.length > 0;
  }

  async renderLog(task) {
    const box = $("task-log-box");
    box.hidden = task.kind !== "command";
    if (box.hidden) return;
    // fetched when the panel opens, on each poll while the task runs, and once more
    // whenever its status changes (the final output)
    const stamp = `${task.status}|${task.launches}|${task.run_id}`;
    if (stamp === this.logFor && task.status !== "running") return;
    this.logFor = stamp;
    const name = task.name;
    let log;
    try {
      log = await getJSON(`${this.base}/tasks/${encodeURIComponent(name)}/log`);
    } catch (error) {
      if (this.name === name) $("task-log-note").textContent = error.message;
      return;
    }
    if (this.name !== name) return; // another box was picked meanwhile
    const text = log.log || "";
    const shown = text.length > LOG_TAIL ? text.slice(-LOG_TAIL) : text;
    const notes = [`${log.log_bytes} bytes${log.running ? " so far" : ""}`];
    if (log.log_dropped) notes.push(`${log.log_dropped} bytes dropped by the log's cap`);
    if (shown.length < text.length) notes.push("the last 64 KiB shown");
    $("task-log-note").textContent = log.run_id ? notes.join("; ") + "." : "Not run yet.";
    $("task-log").textContent = shown;
    const pre = $("task-log");
    pre.scrollTop = pre.scrollHeight;
  }

  async act(action, question) {
    const name = this.name;
    const answer = await confirmAction(question, true);
    if (!answer) return;
    try {
      await post(`${this.base}/tasks/${encodeURIComponent(name)}/${action}`, answer);
      this.error("");
    } catch (error) {
      this.error(error.message);
    }
    this.refreshNow();
  }

  async answer(status) {
    const name = this.name;
    const data = readForm();
    const verb = status === "finished" ? "done" : "failed";
    const answer = await confirmAction(`Mark task ${name} as ${verb}?`, true);
    if (!answer) return;
    try {
      await post(`${this.base}/tasks/${encodeURIComponent(name)}/done`, { data, status, ...answer });
      this.error("");
    } catch (error) {
      this.error(error.message);
    }
    this.refreshNow();
  }

  error(text) {
    $("flow-panel-error").textContent = text;
    $("flow-panel-error").hidden = !text;
  }
}

/* An argv as a shell would read it back: words with spaces or quotes quoted. */
function shellWords(argv) {
  return argv.map((word) => /^[\w@%+=:,./-]+$/.test(word) ? word
    : "'" + word.replaceAll("'", "'\\''") + "'").join(" ");
}

function renderFacts(task) {
  const running = task.status === "running";
  const elapsed = running && task.started_at
    ? Math.max(0, Date.now() - Date.parse(isoTime(task.started_at))) / 1000 : null;
  setFacts($("flow-panel-facts"), [
    ["Kind", task.kind],
    ["Command", task.command && task.command.length ? el("code", shellWords(task.command)) : null],
    ["Depends on", (task.depends_on || []).join(", ") || "—"],
    ["Host", task.host],
    ["PID", task.pid],
    ["Attempts", String(task.attempts)],
    ["Launches", task.launches > 1 ? String(task.launches) : null],
    ["Exit code", task.exit_code === null || task.exit_code === undefined
      ? null : String(task.exit_code)],
    ["Started", task.started_at && formatTime(isoTime(task.started_at))],
    ["Finished", task.finished_at && formatTime(isoTime(task.finished_at))],
    ["Duration", running ? `${formatDuration(elapsed)} so far` : task.duration !== null &&
      task.duration !== undefined && formatDuration(task.duration)],
    ["Expected", task.expected !== null && task.expected !== undefined &&
      formatDuration(task.expected)],
    ["Assignee", task.assignee],
    ["Answered by", task.by],
  ]);
}

/* One input of a human task's form: a checkbox for bool, a number for int and float,
   a text box for str; a type ending in "?" is optional. */
function formField(name, declared) {
  const optional = declared.endsWith("?");
  const type = optional ? declared.slice(0, -1) : declared;
  const input = el("input", null, { name, "data-type": type, "data-optional": String(optional) });
  if (type === "bool") input.setAttribute("type", "checkbox");
  else if (type === "int") input.setAttribute("type", "number");
  else if (type === "float") {
    input.setAttribute("type", "number");
    input.setAttribute("step", "any");
  } else input.setAttribute("type", "text");
  const label = el("label", null, { class: type === "bool" ? "field check" : "field" });
  const caption = el("span", optional ? `${name} (optional)` : name);
  if (type === "bool") label.append(input, caption);
  else label.append(caption, input);
  return label;
}

/* The form's values as the API takes them: booleans, numbers and text; an empty
   optional field is left out (an empty required one too: the API names it). */
function readForm() {
  const data = {};
  for (const input of $("task-form-fields").querySelectorAll("input")) {
    const type = input.getAttribute("data-type");
    if (type === "bool") {
      data[input.name] = input.checked;
    } else if (input.value.trim() !== "") {
      data[input.name] = type === "str" ? input.value : Number(input.value);
    } else if (type === "str" && input.getAttribute("data-optional") !== "true") {
      data[input.name] = ""; // an empty text is an answer
    }
  }
  return data;
}
