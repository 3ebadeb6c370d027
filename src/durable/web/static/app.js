/* durable dashboard: a hash-routed page over the JSON API in api/v1.

   Plain ES modules, no framework and no build step, so the package ships the files as
   they are. Rules that keep it safe and mountable:
   - every value from the server reaches the DOM through textContent or setAttribute,
     never as HTML (run ids, names and payloads are user data);
   - URLs are relative (api/v1/...), so the app works under any mount prefix;
   - no inline scripts or styles: the Content-Security-Policy is default-src 'self'.

   This module starts the page: it reads the session, routes #/ (the overview),
   #/runs[?filters], #/runs/<id>, #/workflows, #/schedules, #/queues, #/flows and
   #/flows/<id>[?task=<name>] to their pages, and keeps the current page fresh while
   the tab is visible and Live is on: refreshed at each change the server's live stream
   announces (live.js), or polled every REFRESH_MS while that stream is down. An older
   #/?filters link (the runs list was once #/) is redirected to #/runs?filters. */

import { $, clearNotice, formatTime, notice } from "./dom.js";
import { getJSON, session } from "./http.js";
import { flowPage, flowsPage } from "./flow.js";
import { liveStream } from "./live.js";
import { overviewPage } from "./overview.js";
import { closePanel, startPanel } from "./panel.js";
import { queuesPage } from "./queues.js";
import { runPage } from "./run.js";
import { runsPage } from "./runs.js";
import { schedulesPage } from "./schedules.js";
import { workflowsPage } from "./workflows.js";

const REFRESH_MS = 5000;

const poller = { live: true, streaming: false, timer: 0, inflight: null, again: false,
  page: null };

/* Refresh the current page now (once, however often asked meanwhile), then again
   every REFRESH_MS while live and visible, unless the live stream is up. */
function refreshNow() {
  clearTimeout(poller.timer);
  if (poller.inflight) {
    poller.again = true;
    return poller.inflight;
  }
  poller.inflight = (async () => {
    do {
      poller.again = false;
      try {
        await poller.page.refresh();
        clearNotice("poll");
        $("updated").textContent = "updated " + formatTime(new Date().toISOString()).slice(11);
      } catch (error) {
        notice(error.message, "poll");
      }
    } while (poller.again);
  })().finally(() => {
    poller.inflight = null;
    schedule();
  });
  return poller.inflight;
}

function schedule() {
  clearTimeout(poller.timer);
  if (poller.live && !document.hidden && !poller.streaming) {
    poller.timer = setTimeout(refreshNow, REFRESH_MS);
  }
}

/* The stream refreshes at each change; while it is down, the timer polls. */
const stream = liveStream(() => {
  if (poller.page) refreshNow();
}, (up) => {
  poller.streaming = up;
  const button = $("live");
  button.setAttribute("data-stream", up ? "up" : "down");
  button.setAttribute("title", up ? "Refreshed at each change in the database"
    : "Refreshed every few seconds while this tab is visible");
  schedule();
});

function setLive(live) {
  poller.live = live;
  const button = $("live");
  button.setAttribute("aria-pressed", String(live));
  button.textContent = live ? "Live" : "Paused";
  if (live) {
    stream.open();
    refreshNow();
  } else {
    stream.close();
    clearTimeout(poller.timer);
  }
}

/* The flow and task of a #/flows/<id>[?task=<name>] link (a human task's notification
   links to its form so; ids may hold a raw slash), or null. */
function flowTarget(hash) {
  const match = /^#\/flows\/(.+?)(?:\?task=(.*))?$/.exec(hash);
  if (!match) return null;
  try {
    return { id: decodeURIComponent(match[1]),
      task: match[2] === undefined ? null : decodeURIComponent(match[2]) };
  } catch (ignored) {
    notice("This link holds a malformed flow id; showing the list of flows.", "error");
    return { id: null, task: null };
  }
}

/* The filters of a #/runs?... link, or null when the hash is not the runs list. */
function runsTarget(hash) {
  const match = /^#\/runs(?:\?(.*))?$/.exec(hash);
  return match ? new URLSearchParams(match[1] || "") : null;
}

function route() {
  closePanel();
  if (/^#\/?\?/.test(location.hash)) { // #/?status=failed: the runs list's old address
    location.replace("#/runs?" + location.hash.slice(location.hash.indexOf("?") + 1));
    return;
  }
  const match = /^#\/runs\/(.+)$/.exec(location.hash);
  let runId = null;
  if (match) {
    try {
      runId = decodeURIComponent(match[1]);
    } catch (ignored) {
      notice("This link holds a malformed run id; showing the list of runs.", "error");
    }
  }
  const schedules = location.hash === "#/schedules";
  const queues = location.hash === "#/queues";
  const workflows = location.hash === "#/workflows";
  const flow = flowTarget(location.hash);
  const flows = location.hash === "#/flows" || flow !== null;
  const runsQuery = runsTarget(location.hash);
  const runs = match !== null || runsQuery !== null; // a run's page belongs to the list
  if (runId !== null) poller.page = runPage(runId, refreshNow);
  else if (schedules) poller.page = schedulesPage(refreshNow);
  else if (queues) poller.page = queuesPage();
  else if (workflows) poller.page = workflowsPage();
  else if (flow && flow.id !== null) poller.page = flowPage(flow.id, flow.task, refreshNow);
  else if (flows) poller.page = flowsPage(refreshNow);
  else if (runs) poller.page = runsPage(refreshNow, runsQuery);
  else poller.page = overviewPage();
  // the nav link of the list this page is (or belongs to) is marked current
  const overview = !runs && !schedules && !queues && !workflows && !flows;
  const links = [["nav-overview", overview], ["nav-runs", runs], ["nav-schedules", schedules],
    ["nav-queues", queues], ["nav-workflows", workflows], ["nav-flows", flows]];
  for (const [link, current] of links) {
    if (current) $(link).setAttribute("aria-current", "page");
    else $(link).removeAttribute("aria-current");
  }
  refreshNow();
}

async function start() {
  $("live").addEventListener("click", () => setLive(!poller.live));
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      clearTimeout(poller.timer);
      stream.close();
    } else if (poller.live) {
      stream.open();
      refreshNow();
    }
  });
  window.addEventListener("hashchange", route);
  startPanel();
  try {
    Object.assign(session, await getJSON("api/v1/session"));
    $("read-only").hidden = !session.read_only;
  } catch (error) {
    notice(error.message, "error"); // the pages still try, and say what is wrong
  }
  route();
  if (poller.live && !document.hidden) stream.open();
}

start();
