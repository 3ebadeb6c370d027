/* A run's streams on its page: each stream a list of its values, followed live with
   an EventSource (GET api/v1/runs/<id>/streams/<name>, Server-Sent Events) while the
   run writes, ending at the stream's close or the run's end. The list of streams is
   read again at each refresh of the page, so a stream the run starts later shows too;
   a connection that failed (a 503 when too many streams are followed) is opened again
   from the last value shown at the next refresh. */

import { $, el, pretty } from "./dom.js";
import { getJSON } from "./http.js";

/* The most values shown per stream: the oldest go first. */
const SHOWN = 500;

/* Every EventSource open on the page, closed when the page changes. */
const open = new Set();
window.addEventListener("hashchange", () => {
  for (const source of open) source.close();
  open.clear();
});

/* The Streams section of the run page at *base* (api/v1/runs/<encoded id>).
   Returns refresh(), to call at each refresh of the page. */
export function streamsView(base) {
  const shown = new Map(); // name -> { list, state, next, ended, source }

  function follow(name, entry) {
    const url = `${base}/streams/${encodeURIComponent(name)}?offset=${entry.next}`;
    const source = new EventSource(url);
    entry.source = source;
    open.add(source);
    const stop = () => {
      source.close();
      open.delete(source);
    };
    source.addEventListener("message", (event) => {
      if (!entry.list.isConnected) return stop(); // the page moved on
      const item = JSON.parse(event.data);
      entry.next = item.offset + 1;
      entry.list.append(el("li", pretty(item.value), { "data-offset": String(item.offset),
        class: "value mono" }));
      while (entry.list.childElementCount > SHOWN) entry.list.firstElementChild.remove();
      entry.state.textContent = `${entry.next} values, live`;
    });
    source.addEventListener("end", () => {
      stop();
      entry.ended = true;
      entry.state.textContent = `${entry.next} values, ended`;
    });
    source.addEventListener("error", () => {
      // EventSource retries dropped connections itself; a refused one is closed
      if (source.readyState === EventSource.CLOSED) {
        open.delete(source);
        entry.state.textContent = `${entry.next} values (disconnected; retrying)`;
      }
    });
  }

  return async function refresh() {
    const box = $("run-streams-box");
    if (!box) return;
    const { items } = await getJSON(`${base}/streams`);
    box.hidden = items.length === 0;
    for (const info of items) {
      let entry = shown.get(info.name);
      if (!entry) {
        const list = el("ol", null, { class: "stream-values", "data-stream": info.name });
        const state = el("span", "", { class: "muted stream-state" });
        const title = el("h3", null);
        title.append(el("span", info.name, { class: "mono" }), " ", state);
        $("streams-list").append(el("section", null, { class: "stream" }));
        $("streams-list").lastElementChild.append(title, list);
        entry = { list, state, next: 0, ended: false, source: null };
        shown.set(info.name, entry);
      }
      const idle = !entry.source || entry.source.readyState === EventSource.CLOSED;
      if (!entry.ended && idle) follow(info.name, entry);
    }
  };
}
