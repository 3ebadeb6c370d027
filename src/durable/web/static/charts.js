/* SVG charts drawn here, no chart library: the overview's grouped bars of runs started,
   completed and failed per minute or hour, and the workflows page's sparklines.

   Every bar is a link to the runs list filtered to its runs (its bucket's creation
   times, and the status of its series), with a <title> and an aria-label saying its
   figure. A chart is one Tab stop (the bar last focused, else the newest started bar);
   the arrow keys move between its bars, Home and End to its ends, Enter opens one.
   Colours come from app.css (Okabe-Ito, safe for colour-blind eyes); the series differ
   by their legend's text and their place in the group too. */

import { el, formatTime, svg } from "./dom.js";

/* The series of the bars, in the order they stand in each group. status: the runs
   list's status filter for that series' runs (none for started: every run). */
export const SERIES = [
  { key: "started", label: "started", status: "" },
  { key: "completed", label: "completed", status: "completed" },
  { key: "failed", label: "failed, dead or timed out", status: "failed,dead,timed_out" },
];

const HEIGHT = 190;
const TOP = 10;
const BOTTOM = 26;
const LEFT = 48;
const RIGHT = 24;

/* The runs list of one bar: runs created in [at, at + grain), of the series' status. */
export function bucketHref(at, grain, series) {
  const start = new Date(at);
  const query = new URLSearchParams({
    since: start.toISOString().replace(".000Z", "Z"),
    until: new Date(start.getTime() + grain * 1000).toISOString().replace(".000Z", "Z"),
  });
  if (series.status) query.set("status", series.status);
  return "#/runs?" + query.toString();
}

/* A round top for the y axis at or above value, and the step of its gridlines. */
function scale(value) {
  const top = Math.max(1, value);
  const magnitude = 10 ** Math.floor(Math.log10(top));
  for (const step of [0.1, 0.2, 0.25, 0.5, 1, 2]) {
    const size = Math.max(1, step * magnitude);
    if (top / size <= 5) return { top: Math.ceil(top / size) * size, step: size };
  }
  return { top, step: top };
}

function pad(number) {
  return String(number).padStart(2, "0");
}

/* The x axis label of a bucket, or null: every 10 minutes, or each day at midnight. */
function tickLabel(at, grain, index) {
  const d = new Date(at);
  if (grain < 3600) return d.getMinutes() % 10 === 0 ? `${pad(d.getHours())}:${pad(d.getMinutes())}` : null;
  if (d.getHours() === 0 || (index === 0 && d.getHours() < 20)) {
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  }
  return null;
}

/* The text a bar says of itself: "12 runs started 21:04–21:05". */
function barText(bucket, grain, series) {
  const from = formatTime(bucket.at);
  const to = formatTime(new Date(new Date(bucket.at).getTime() + grain * 1000).toISOString());
  const runs = bucket[series.key] === 1 ? "run" : "runs";
  return `${bucket[series.key]} ${runs} ${series.label}, created ${from} – ${to.slice(11)}`;
}

/* Draw buckets ([{at, started, completed, failed}], oldest first, grain seconds each)
   into box as a grouped bar chart with axes and a legend; title names it. Keeps the
   focused bar focused across redraws. */
export function barChart(box, buckets, grain, title) {
  const focused = box.querySelector("a.bar:focus, a.bar[tabindex='0']");
  const keep = focused ? [focused.getAttribute("data-at"), focused.getAttribute("data-series")] : null;
  const hadFocus = focused !== null && focused === document.activeElement;
  const bar = grain < 3600 ? 4 : 2;
  const gap = grain < 3600 ? 3 : 1;
  const group = bar * SERIES.length + gap;
  const width = LEFT + buckets.length * group + RIGHT;
  const plot = HEIGHT - TOP - BOTTOM;
  const most = Math.max(0, ...buckets.flatMap((b) => SERIES.map((s) => b[s.key] || 0)));
  const { top, step } = scale(most);
  const y = (value) => TOP + plot - (value / top) * plot;
  const chart = svg("svg", {
    class: "chart", viewBox: `0 0 ${width} ${HEIGHT}`, role: "group", "aria-label": title,
    preserveAspectRatio: "xMinYMin meet", "data-top": top, tabindex: "-1", // its bars are the stops
  });
  for (let value = 0; value <= top; value += step) {
    chart.append(svg("line", { class: "grid-line", x1: LEFT, x2: width - RIGHT, y1: y(value), y2: y(value) }));
    const label = svg("text", { class: "y-label", x: LEFT - 4, y: y(value) + 3 });
    label.textContent = String(value);
    chart.append(label);
  }
  buckets.forEach((bucket, index) => {
    const x0 = LEFT + index * group + gap / 2;
    SERIES.forEach((series, n) => {
      const value = bucket[series.key] || 0;
      const text = barText(bucket, grain, series);
      const link = svg("a", {
        class: `bar series-${series.key}`, href: bucketHref(bucket.at, grain, series),
        tabindex: "-1", "aria-label": text, "data-at": bucket.at, "data-series": series.key,
        "data-value": value, "data-index": index,
      });
      const tip = svg("title");
      tip.textContent = text;
      const x = x0 + n * bar;
      link.append(tip, svg("rect", { class: "hit", x, y: TOP, width: bar, height: plot }),
        svg("rect", { class: "fill", x, y: y(value), width: bar, height: (value / top) * plot }));
      chart.append(link);
    });
    const tick = tickLabel(bucket.at, grain, index);
    if (tick) {
      chart.append(svg("line", { class: "tick", x1: x0, x2: x0, y1: TOP + plot, y2: TOP + plot + 4 }));
      const label = svg("text", { class: "x-label", x: x0, y: HEIGHT - 8 });
      label.textContent = tick;
      chart.append(label);
    }
  });
  chart.append(svg("line", { class: "axis", x1: LEFT, x2: width - RIGHT, y1: TOP + plot, y2: TOP + plot }));
  const bars = Array.from(chart.querySelectorAll("a.bar"));
  let current = keep && bars.find((b) => b.getAttribute("data-at") === keep[0] &&
    b.getAttribute("data-series") === keep[1]);
  if (!current) current = bars[Math.max(0, bars.length - SERIES.length)];
  if (current) current.setAttribute("tabindex", "0");
  chart.addEventListener("keydown", (event) => moveFocus(event, bars));
  chart.addEventListener("focusin", (event) => {
    const target = event.target.closest("a.bar");
    if (!target) return;
    for (const other of bars) other.setAttribute("tabindex", other === target ? "0" : "-1");
  });
  box.replaceChildren(legend(), chart);
  if (hadFocus && current) current.focus();
}

/* Arrow keys move between bars: left/right by bucket, up/down by series. */
function moveFocus(event, bars) {
  const at = bars.indexOf(event.target.closest("a.bar"));
  if (at < 0) return;
  const count = SERIES.length;
  const moves = {
    ArrowLeft: at - count, ArrowRight: at + count, ArrowUp: at - 1, ArrowDown: at + 1,
    Home: at % count, End: bars.length - count + (at % count),
  };
  if (event.key === "Enter") {
    event.preventDefault();
    location.hash = bars[at].getAttribute("href").slice(1);
    return;
  }
  if (!(event.key in moves)) return;
  event.preventDefault();
  const next = bars[Math.min(bars.length - 1, Math.max(0, moves[event.key]))];
  next.focus();
}

function legend() {
  const list = el("ul", null, { class: "legend", "aria-label": "Legend" });
  for (const series of SERIES) {
    const item = el("li");
    item.append(el("span", null, { class: `swatch series-${series.key}` }), series.label);
    list.append(item);
  }
  return list;
}

/* A small line of values (oldest first) as an image whose label lists them. */
export function sparkline(values, label) {
  const width = 96;
  const height = 22;
  const most = Math.max(1, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : width;
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - (v / most) * (height - 4)).toFixed(1)}`);
  const text = `${label}: ${values.join(", ")}`;
  const line = svg("svg", {
    class: "sparkline", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": text, "data-values": values.join(","),
  });
  const tip = svg("title");
  tip.textContent = text;
  line.append(tip, svg("polyline", { points: points.join(" ") }));
  return line;
}
