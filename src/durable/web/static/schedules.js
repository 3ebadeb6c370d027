/* The schedules list (#/schedules): what each fires on, its next and last tick, the run
   its last tick started (a link to its page), and Pause, Resume and Trigger (hidden on
   a read-only dashboard). The columns are those of `durable schedules`. */

import {
  $, cells, chip, confirmAction, el, notice, runLink, syncRows, timeCell, updateChildren,
} from "./dom.js";
import { conditionalGet, post, session } from "./http.js";

/* Mount the page into #view; refreshNow() asks the poller for an immediate refresh. */
export function schedulesPage(refreshNow) {
  $("view").replaceChildren($("schedules-page").content.cloneNode(true));
  const get = conditionalGet();
  const shown = new Map(); // id -> the schedule as last drawn
  let drawn = false;

  async function act(id, action, question, done) {
    if (!(await confirmAction(question, false))) return;
    try {
      notice(done(await post(`api/v1/schedules/${encodeURIComponent(id)}/${action}`, {})));
    } catch (error) {
      notice(error.message, "error");
    }
    refreshNow();
  }

  $("schedules-body").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    const id = button.closest("tr").getAttribute("data-key");
    const schedule = shown.get(id);
    const action = button.getAttribute("data-action");
    if (action === "pause") {
      act(id, "pause", `Pause schedule ${id}? It fires no more until resumed; the runs it ` +
        "started go on.", () => `Schedule ${id} paused.`);
    } else if (action === "resume") {
      act(id, "resume", `Resume schedule ${id}? It fires again from its next tick; the ticks ` +
        "it skipped while paused are not caught up.", () => `Schedule ${id} resumed.`);
    } else if (action === "trigger") {
      act(id, "trigger", `Start a run of ${schedule ? schedule.workflow : id} now, with the ` +
        `arguments of schedule ${id}?`, (answer) => `Started run ${answer.run}.`);
    }
  });

  async function refresh() {
    const { data, changed } = await get("api/v1/schedules");
    if (!changed && drawn) return;
    drawn = true;
    shown.clear();
    for (const schedule of data.items) shown.set(schedule.id, schedule);
    syncRows($("schedules-body"), data.items, (schedule) => schedule.id, fillRow);
    $("schedules-table").hidden = data.items.length === 0;
    $("schedules-empty").hidden = data.items.length > 0;
  }
  return { refresh };
}

/* An interval as people write it: "15m", "1h30m", "1d", "0.5s". */
export function interval(seconds) {
  if (!Number.isInteger(seconds)) return `${seconds}s`;
  let rest = seconds;
  let text = "";
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]]) {
    if (rest >= size) {
      text += `${Math.floor(rest / size)}${unit}`;
      rest %= size;
    }
  }
  return text || "0s";
}

function fillRow(row, schedule) {
  const [id, workflow, when, next, last, lastRun, actions] = cells(row, 7);
  if (!actions.firstChild) {
    id.setAttribute("class", "mono");
    next.append(el("span"));
    actions.setAttribute("class", "row-actions");
    actions.append(
      el("button", "Pause", { type: "button", class: "plain", "data-action": "pause" }),
      el("button", "Resume", { type: "button", "data-action": "resume" }),
      el("button", "Trigger", { type: "button", class: "plain", "data-action": "trigger" }),
    );
  }
  const state = schedule.orphaned ? "orphaned" : schedule.paused ? "paused" : "active";
  row.setAttribute("data-state", state);
  id.textContent = schedule.id;
  workflow.textContent = schedule.workflow;
  when.textContent = schedule.every !== undefined && schedule.every !== null
    ? `every ${interval(schedule.every)}`
    : `${schedule.cron} (${schedule.timezone})`;
  const tick = next.firstChild;
  if (state === "active") {
    tick.removeAttribute("class");
    tick.removeAttribute("data-status");
    timeCell(tick, schedule.next_fire_at);
  } else {
    chip(tick, state);
    tick.setAttribute("title", state === "paused"
      ? "Paused: it fires no more until resumed."
      : "Orphaned: the code workers run no longer declares it; it fires no more.");
  }
  timeCell(last, schedule.last_fire_at);
  const run = schedule.last_run;
  if (run) {
    const status = el("span");
    chip(status, run.status || "gone");
    if (!run.status) status.setAttribute("title", "This run is no longer stored (purged).");
    // updated in place: a focused link keeps the focus when the page refreshes
    updateChildren(lastRun, runLink(run.id), " ", status);
  } else {
    updateChildren(lastRun, "—");
  }
  const [pause, resume, trigger] = Array.from(actions.children);
  pause.hidden = session.read_only || schedule.paused;
  resume.hidden = session.read_only || !schedule.paused;
  trigger.hidden = session.read_only;
}
