/* The timeline of a run: one bar per recorded step, from started_at to finished_at
   (an unfinished one runs to now), on a shared wall-clock axis, coloured by status. */

import { el, formatDuration, formatTime, shortName, svg } from "./dom.js";

const LABEL_WIDTH = 220;
const CHART_WIDTH = 680;
const ROW = 22;

export function drawTimeline(box, run) {
  const steps = (run.history || []).filter((step) => step.started_at);
  if (steps.length === 0) {
    box.replaceChildren(el("p", "Nothing has started yet.", { class: "muted" }));
    return;
  }
  const time = (iso) => new Date(iso).getTime() / 1000;
  const now = Date.now() / 1000;
  const end = (step) => (step.finished_at ? time(step.finished_at) : now);
  const first = Math.min(...steps.map((step) => time(step.started_at)));
  const span = Math.max(Math.max(...steps.map(end)) - first, 0.001);
  const height = steps.length * ROW + 24;
  const chart = svg("svg", {
    class: "timeline", viewBox: `0 0 ${LABEL_WIDTH + CHART_WIDTH + 10} ${height}`,
    role: "img", "aria-label": "Timeline of the run's steps",
  });
  chart.append(svg("line", {
    class: "axis", x1: LABEL_WIDTH, y1: 4, x2: LABEL_WIDTH, y2: height - 18,
  }));
  steps.forEach((step, index) => {
    const y = index * ROW + 4;
    const started = time(step.started_at);
    const name = svg("text", { class: "row-label", x: LABEL_WIDTH - 8, y: y + 13 });
    name.textContent = `#${step.position} ${shortName(step.name)}`.slice(0, 34);
    const bar = svg("rect", {
      class: `bar status-${step.status}${step.timed_out ? " timed-out" : ""}`,
      x: (LABEL_WIDTH + ((started - first) / span) * CHART_WIDTH).toFixed(1),
      y: y + 2,
      width: Math.max(((end(step) - started) / span) * CHART_WIDTH, 3).toFixed(1),
      height: ROW - 8,
      rx: 2,
      "data-position": step.position,
    });
    const title = svg("title");
    title.textContent = `${step.name}: ${step.timed_out ? "timed out" : step.status}, ` +
      formatDuration(step.duration) + (step.attempts > 1 ? `, ${step.attempts} attempts` : "");
    bar.append(title);
    chart.append(name, bar);
  });
  const zero = svg("text", { class: "scale start", x: LABEL_WIDTH, y: height - 4 });
  zero.textContent = formatTime(new Date(first * 1000).toISOString()).slice(11);
  const total = svg("text", { class: "scale", x: LABEL_WIDTH + CHART_WIDTH, y: height - 4 });
  total.textContent = formatDuration(span);
  chart.append(zero, total);
  box.replaceChildren(chart);
}
