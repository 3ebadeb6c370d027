/* The runs list (#/runs): filters, a table of runs newest first, and paging by cursor.

   The filters live in the address too (#/runs?status=failed&since=...), so the overview's
   counts and bars, the workflows page and a pasted link open the list already filtered;
   changing a filter rewrites the address in place (no new history entry). */

import { $, cells, chip, el, formatDuration, formatTime, runLink, syncRows, timeCell }
  from "./dom.js";
import { conditionalGet } from "./http.js";

const PAGE_SIZE = "50";

/* Kept while the tab lives, so coming back from a run finds the same filters. */
const filters = {
  status: "", workflow: "", version: "", search: "", attr: "", queue: "", since: "", until: "",
};

/* Mount the page into #view; refreshNow() asks the poller for an immediate refresh.
   query: the URLSearchParams of the address; when it names any filter, the filters are
   exactly those it names, else the tab's last ones stay. */
export function runsPage(refreshNow, query) {
  $("view").replaceChildren($("runs-page").content.cloneNode(true));
  const form = $("filters");
  const get = conditionalGet();
  let cursors = [null]; // the cursor of each page seen since the first; last: this page
  let nextCursor = null;
  let drawn = false;
  if (query && Array.from(query.keys()).length > 0) readFilters(query);
  for (const [name, value] of Object.entries(filters)) {
    const field = form.elements[name];
    if (field.tagName === "SELECT") ensureOption(field, value);
    field.value = value;
  }

  let debounce = 0;
  const changed = () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => {
      for (const name of Object.keys(filters)) filters[name] = form.elements[name].value.trim();
      history.replaceState(null, "", "#/runs?" + filterQuery().toString());
      cursors = [null];
      refreshNow();
    }, 250);
  };
  form.addEventListener("input", changed);
  form.addEventListener("change", changed);
  form.addEventListener("submit", (event) => event.preventDefault());
  $("next-page").addEventListener("click", () => {
    cursors.push(nextCursor);
    refreshNow();
  });
  $("first-page").addEventListener("click", () => {
    cursors = [null];
    refreshNow();
  });

  async function refresh() {
    const query = new URLSearchParams({ limit: PAGE_SIZE });
    for (const [name, value] of Object.entries(filters)) {
      if (value && name !== "attr") query.set(name, value);
    }
    if (!addAttributes(query, filters.attr, form.elements.attr)) return;
    const cursor = cursors[cursors.length - 1];
    if (cursor) query.set("cursor", cursor);
    const { data, changed: fresh } = await get("api/v1/runs?" + query.toString());
    if (!fresh && drawn) return;
    drawn = true;
    syncRows($("runs-body"), data.items, (run) => run.id, fillRow);
    $("runs-empty").hidden = data.items.length > 0;
    nextCursor = data.next_cursor;
    $("next-page").disabled = !nextCursor;
    $("first-page").disabled = cursors.length === 1;
  }
  return { refresh };
}

/* Take the filters from an address's query: attr.<key>=<value> pairs join the
   attributes filter. */
function readFilters(query) {
  for (const name of Object.keys(filters)) filters[name] = (query.get(name) || "").trim();
  const pairs = [];
  for (const [name, value] of query.entries()) {
    if (name.startsWith("attr.")) pairs.push(`${name.slice(5)}=${value}`);
  }
  if (pairs.length > 0) filters.attr = pairs.join(" ");
}

/* The filters set, as the query of an address (attributes as typed). */
function filterQuery() {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) if (value) query.set(name, value);
  return query;
}

/* A select offers the value a link gave even when its list does not: a status list
   (failed,dead,timed_out) or an exact time (a chart's bar). */
function ensureOption(select, value) {
  if (!value || Array.from(select.options).some((option) => option.value === value)) return;
  let text = value.split(",").join(", ");
  if (select.name === "since" && !/^\d+[smhd]$/.test(value)) text = "from " + formatTime(value);
  select.append(el("option", text, { value }));
}

/* "customer=c-42 region=eu" as ?attr.customer=c-42&attr.region=eu; false (the input
   marked invalid, nothing fetched) while a pair has no "=". */
function addAttributes(query, text, input) {
  const pairs = text.split(/\s+/).filter(Boolean);
  const bad = pairs.find((pair) => pair.indexOf("=") < 1);
  input.setCustomValidity(bad ? `"${bad}" is not key=value` : "");
  if (bad) return false;
  for (const pair of pairs) {
    const at = pair.indexOf("=");
    query.set("attr." + pair.slice(0, at), pair.slice(at + 1));
  }
  return true;
}

/* key=value, key=value: attributes as a filter matches them. */
function attributesText(attributes) {
  return Object.entries(attributes || {})
    .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`)
    .join(", ");
}

function fillRow(row, run) {
  const [status, id, workflow, version, created, duration, attributes] = cells(row, 7);
  if (!status.firstChild) {
    status.append(el("span"));
    id.append(runLink(run.id));
  }
  row.setAttribute("data-status", run.status);
  chip(status.firstChild, run.status);
  workflow.textContent = run.workflow;
  version.textContent = run.version ?? "-";
  timeCell(created, run.created_at);
  duration.textContent = formatDuration(run.duration);
  attributes.textContent = attributesText(run.attributes);
}
