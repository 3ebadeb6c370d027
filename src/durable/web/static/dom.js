/* Small DOM helpers: building elements, formatting values, keyed table rows, the notice
   line and the confirmation dialog.

   Everything that comes from the server passes through textContent or setAttribute
   here, never through HTML parsing: run ids, names and payloads are user data. */

const SVG_NS = "http://www.w3.org/2000/svg";
const NAME_KEY = "durable.name";

export const $ = (id) => document.getElementById(id);

export function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  return node;
}

export function svg(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  return node;
}

export function runHref(id) {
  return "#/runs/" + encodeURIComponent(id);
}

export function runLink(id) {
  return el("a", id, { href: runHref(id), class: "mono" });
}

export function flowHref(id) {
  return "#/flows/" + encodeURIComponent(id);
}

export function flowLink(id) {
  return el("a", id, { href: flowHref(id), class: "mono" });
}

export function chip(node, status) {
  node.textContent = status;
  node.setAttribute("class", "chip status-" + status);
  node.setAttribute("data-status", status);
}

function pad(number) {
  return String(number).padStart(2, "0");
}

/* Local time, "2026-11-21 10:00:00" (timeCell puts the exact UTC time in the title). */
export function formatTime(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/* A time from the API as ISO 8601: flows give epoch seconds, runs ISO text already. */
export function isoTime(value) {
  if (value === null || value === undefined) return null;
  return typeof value === "number" ? new Date(value * 1000).toISOString() : String(value);
}

export function timeCell(td, iso) {
  td.textContent = formatTime(iso);
  if (iso) td.setAttribute("title", iso);
  else td.removeAttribute("title");
}

export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m ${pad(Math.floor(seconds % 60))}s`;
  return `${Math.floor(minutes / 60)}h ${pad(minutes % 60)}m`;
}

/* "module.task" -> "task": the timeline has little room. */
export function shortName(name) {
  return String(name).split(".").pop() || String(name);
}

export function pretty(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

/* Like node.replaceChildren(...parts) (nodes or text), but what the node holds already
   is kept where it matches: a child of the same name at the same place takes the new
   part's attributes and content, and only the others are replaced. What a page redraws
   at each refresh goes through here when it holds a link or a button, so one with the
   keyboard focus keeps it (a replaced one drops the focus to the page). */
export function updateChildren(node, ...parts) {
  const old = Array.from(node.childNodes);
  parts.forEach((part, index) => {
    const fresh = part instanceof Node ? part : document.createTextNode(String(part));
    const current = old[index];
    if (current === undefined) {
      node.append(fresh);
    } else if (current.nodeName !== fresh.nodeName ||
        current.namespaceURI !== fresh.namespaceURI) {
      current.replaceWith(fresh);
    } else if (current.nodeType !== Node.ELEMENT_NODE) {
      if (current.nodeValue !== fresh.nodeValue) current.nodeValue = fresh.nodeValue;
    } else {
      for (const { name } of Array.from(current.attributes)) {
        if (!fresh.hasAttribute(name)) current.removeAttribute(name);
      }
      for (const { name, value } of Array.from(fresh.attributes)) {
        if (current.getAttribute(name) !== value) current.setAttribute(name, value);
      }
      updateChildren(current, ...Array.from(fresh.childNodes));
    }
  });
  for (const extra of old.slice(parts.length)) extra.remove();
}

/* Put child right after previous (first when previous is null) unless it is there.
   One already on the page is moved with moveBefore where the browser has it, which
   keeps the keyboard focus in it; insertBefore would drop the focus to the page. */
function place(parent, child, previous) {
  const wanted = previous ? previous.nextSibling : parent.firstChild;
  if (wanted === child) return;
  if (child.parentNode === parent && parent.isConnected &&
      typeof parent.moveBefore === "function") {
    parent.moveBefore(child, wanted);
  } else {
    parent.insertBefore(child, wanted);
  }
}

/* Fill a <dl> from [label, value] pairs, one <div> per pair, skipping empty values; a
   value may be a ready node (a link). The pairs are updated in place, found by label
   (updateChildren: a focused link in one keeps the focus). */
export function setFacts(dl, facts) {
  const existing = new Map();
  for (const pair of Array.from(dl.children)) {
    existing.set(pair.firstElementChild.textContent, pair);
  }
  let previous = null;
  for (const [label, value] of facts) {
    if (value === null || value === undefined || value === "" || value === false) continue;
    let pair = existing.get(label);
    if (pair) {
      existing.delete(label);
    } else {
      pair = el("div");
      pair.append(el("dt", label), el("dd"));
    }
    updateChildren(pair.lastElementChild, value);
    place(dl, pair, previous);
    previous = pair;
  }
  for (const pair of existing.values()) pair.remove();
}

/* Update a table body in place, one row per item keyed by keyOf(item): existing rows
   are reused (so references to them and the keyboard focus in them stay across
   polls), new ones made, gone ones removed, and the order follows items. */
export function syncRows(tbody, items, keyOf, fill) {
  const existing = new Map();
  for (const row of Array.from(tbody.rows)) existing.set(row.getAttribute("data-key"), row);
  let previous = null;
  for (const item of items) {
    const key = String(keyOf(item));
    let row = existing.get(key);
    if (row) existing.delete(key);
    else row = el("tr", null, { "data-key": key });
    fill(row, item);
    place(tbody, row, previous);
    previous = row;
  }
  for (const row of existing.values()) row.remove();
}

/* The row's cells, adding empty ones up to count. */
export function cells(row, count) {
  while (row.cells.length < count) row.append(el("td"));
  return Array.from(row.cells);
}

let noticeTimer = 0;

/* Show one line under the top bar. kind "info" fades after a while; "error" stays;
   "poll" (the API cannot be reached) stays until the next poll succeeds. */
export function notice(text, kind = "info") {
  const box = $("notice");
  box.textContent = text;
  box.setAttribute("class", "notice " + kind);
  box.setAttribute("data-kind", kind);
  box.hidden = false;
  clearTimeout(noticeTimer);
  if (kind === "info") noticeTimer = setTimeout(() => clearNotice("info"), 10000);
}

export function clearNotice(kind) {
  const box = $("notice");
  if (box.getAttribute("data-kind") === kind) box.hidden = true;
}

/* The name of whoever uses this browser, as last typed in a form. */
export function storedName() {
  try {
    return localStorage.getItem(NAME_KEY) || "";
  } catch (ignored) {
    return ""; // storage disabled: ask every time
  }
}

export function rememberName(name) {
  try {
    if (name) localStorage.setItem(NAME_KEY, name);
  } catch (ignored) {
    // storage disabled: nothing to remember
  }
}

/* Ask before acting, optionally for the actor's name too. Resolves to {actor} on
   confirmation (actor undefined when no name is known), null otherwise. */
export function confirmAction(text, askName) {
  const dialog = $("confirm");
  const actor = $("confirm-actor");
  $("confirm-text").textContent = text;
  actor.closest("label").hidden = !askName;
  actor.value = storedName();
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      if (dialog.returnValue !== "ok") return resolve(null);
      const name = askName ? actor.value.trim() : storedName();
      rememberName(name);
      return resolve({ actor: name || undefined });
    }, { once: true });
    dialog.showModal();
  });
}
