/* The queues list (#/queues): each queue's depth, running runs, limits, rate, how long
   its oldest queued run has waited, and its running runs per key. The columns are those
   of `durable queues`; nothing here acts. */

import { $, cells, el, formatDuration, syncRows } from "./dom.js";
import { conditionalGet } from "./http.js";

/* Mount the page into #view. */
export function queuesPage() {
  $("view").replaceChildren($("queues-page").content.cloneNode(true));
  const get = conditionalGet();
  let drawn = false;

  async function refresh() {
    const { data, changed } = await get("api/v1/queues");
    if (!changed && drawn) return;
    drawn = true;
    syncRows($("queues-body"), data.items, (queue) => queue.name, fillRow);
    $("queues-table").hidden = data.items.length === 0;
    $("queues-empty").hidden = data.items.length > 0;
  }
  return { refresh };
}

/* A limit, or "—" for none. */
function limitText(value) {
  return value === null || value === undefined ? "—" : String(value);
}

function fillRow(row, queue) {
  const [name, queued, running, limit, keyLimit, rate, oldest, keys] = cells(row, 8);
  name.setAttribute("class", "mono");
  name.textContent = queue.name;
  queued.textContent = String(queue.queued);
  running.textContent = String(queue.running);
  const full = queue.concurrency !== null && queue.running >= queue.concurrency;
  row.setAttribute("data-full", String(full));
  limit.textContent = limitText(queue.concurrency);
  keyLimit.textContent = limitText(queue.key_concurrency);
  const rates = [queue.rate, queue.key_rate === null ? null : `${queue.key_rate} per key`];
  rate.textContent = rates.filter((text) => text !== null).join(" · ") || "—";
  oldest.textContent = formatDuration(queue.oldest_queued_age);
  if (queue.oldest_queued_at) oldest.setAttribute("title", `since ${queue.oldest_queued_at}`);
  else oldest.removeAttribute("title");
  const entries = Object.entries(queue.keys || {});
  if (entries.length === 0) {
    keys.replaceChildren("—");
  } else {
    keys.replaceChildren(...entries.map(([key, count]) =>
      el("span", `${key}=${count}`, { class: "key mono" })));
  }
}
