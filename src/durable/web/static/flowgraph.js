/* A process flow's DAG as SVG, drawn from the server's layout (the "layout" of GET
   api/v1/flows/<id>): one box per task, one arrow per dependency.

   The layout comes from the flow's file, so it does not change while the flow runs:
   the boxes and arrows are built once per layout key, and each poll only changes the
   attributes of the boxes whose status moved (class, data-status, the status line),
   which keeps a 1,000-task graph responsive. Every server value reaches the DOM through
   textContent or setAttribute. */

import { svg } from "./dom.js";

/* Longest task name drawn in a box; the full name is in its title and the panel. */
const LABEL_MAX = 22;
/* Statuses whose outgoing arrows are drawn solid: their dependents may go on. */
const DONE = "finished";

export class FlowGraph {
  /* onSelect(taskName) is called when a box is clicked or activated with Enter/Space. */
  constructor(box, onSelect) {
    this.box = box;
    this.root = svg("svg", { class: "flow-graph", role: "group", "aria-label": "Flow graph" });
    const marker = svg("marker", {
      id: "flow-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse",
    });
    marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }));
    const defs = svg("defs");
    defs.append(marker);
    this.edgeLayer = svg("g", { class: "flow-edges" });
    this.nodeLayer = svg("g", { class: "flow-nodes" });
    this.root.append(defs, this.edgeLayer, this.nodeLayer);
    this.key = null;
    this.boxes = new Map(); // task name -> <g>
    this.outgoing = new Map(); // task name -> its arrows' <path>s
    this.shown = new Map(); // task name -> the "status|detail" last painted
    this.selected = null;
    const pick = (target) => {
      const g = target.closest("g.task");
      if (g) onSelect(g.getAttribute("data-name"));
    };
    this.root.addEventListener("click", (event) => pick(event.target));
    this.root.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        pick(event.target);
      }
    });
    box.replaceChildren(this.root);
  }

  /* Draw *flow* (a FlowView): build the picture if its layout is new, then paint the
     statuses. Returns true when the picture was (re)built. */
  update(flow) {
    const built = flow.layout.key !== this.key;
    if (built) this.build(flow);
    for (const task of flow.tasks) this.paint(task);
    return built;
  }

  build(flow) {
    const { layout } = flow;
    this.key = layout.key;
    this.root.setAttribute("viewBox", `0 0 ${layout.width} ${layout.height}`);
    this.root.setAttribute("width", layout.width);
    this.root.setAttribute("height", layout.height);
    this.root.setAttribute("data-key", layout.key);
    this.boxes.clear();
    this.outgoing.clear();
    this.shown.clear();
    const kinds = new Map(flow.tasks.map((task) => [task.name, task.kind]));
    const nodes = document.createDocumentFragment();
    for (const node of layout.nodes) {
      const g = makeBox(node, kinds.get(node.name) || "command");
      this.boxes.set(node.name, g);
      nodes.append(g);
    }
    const edges = document.createDocumentFragment();
    for (const edge of layout.edges) {
      const path = svg("path", {
        class: "flow-edge", d: "M " + edge.points.map((p) => p.join(" ")).join(" L "),
        "marker-end": "url(#flow-arrow)", "data-from": edge.from, "data-to": edge.to,
      });
      if (!this.outgoing.has(edge.from)) this.outgoing.set(edge.from, []);
      this.outgoing.get(edge.from).push(path);
      edges.append(path);
    }
    this.edgeLayer.replaceChildren(edges);
    this.nodeLayer.replaceChildren(nodes);
    this.select(this.selected);
  }

  /* Repaint one box, only if its status or status line changed since last painted. */
  paint(task) {
    const g = this.boxes.get(task.name);
    if (!g) return;
    const detail = statusLine(task);
    const stamp = `${task.status}|${detail}`;
    if (this.shown.get(task.name) === stamp) return;
    this.shown.set(task.name, stamp);
    g.setAttribute("class", `task status-${task.status} kind-${task.kind}` +
      (task.name === this.selected ? " selected" : ""));
    g.setAttribute("data-status", task.status);
    g.setAttribute("aria-label", `${task.name}: ${task.status}`);
    g.querySelector("text.detail").textContent = detail;
    g.querySelector("title").textContent = `${task.name} (${task.status})`;
    for (const path of this.outgoing.get(task.name) || []) {
      path.setAttribute("class", task.status === DONE ? "flow-edge done" : "flow-edge");
    }
  }

  /* Mark the box of *name* as the one the panel shows (null: none). */
  select(name) {
    if (this.selected && this.boxes.has(this.selected)) {
      this.boxes.get(this.selected).classList.remove("selected");
    }
    this.selected = name;
    if (name && this.boxes.has(name)) this.boxes.get(name).classList.add("selected");
  }

  /* Scroll the graph box so that the box of *name* is in view. */
  reveal(name) {
    const g = this.boxes.get(name);
    if (g) g.scrollIntoView({ block: "nearest", inline: "nearest" });
  }
}

/* The <g> of one task: outline (double for a nested flow), a person mark for a human
   task, its name, a status line, and a title with the full name. */
function makeBox(node, kind) {
  const g = svg("g", {
    class: `task kind-${kind}`, transform: `translate(${node.x} ${node.y})`,
    "data-name": node.name, "data-kind": kind, "data-layer": node.layer,
    tabindex: "0", role: "button",
  });
  const parts = [svg("rect", { class: "shape", width: node.w, height: node.h, rx: 6 })];
  if (kind === "flow") {
    parts.push(svg("rect", {
      class: "inner", x: 4, y: 4, width: node.w - 8, height: node.h - 8, rx: 4,
    }));
  }
  if (kind === "human") {
    // a person: head and shoulders, in the top right corner
    const person = svg("g", { class: "person", transform: `translate(${node.w - 20} 6)` });
    person.append(svg("circle", { cx: 7, cy: 4, r: 3.5 }),
      svg("path", { d: "M 0 16 C 0 8 14 8 14 16 Z" }));
    parts.push(person);
  }
  const label = svg("text", { class: "label", x: node.w / 2, y: node.h / 2 - 3 });
  label.textContent = node.name.length > LABEL_MAX
    ? node.name.slice(0, LABEL_MAX - 1) + "…" : node.name;
  parts.push(label, svg("text", { class: "detail", x: node.w / 2, y: node.h / 2 + 13 }),
    svg("title"));
  g.append(...parts);
  return g;
}

/* The second line of a box: its status in a few words. */
function statusLine(task) {
  const status = task.status.replace("_", " ");
  if (task.status === "waiting") return "waiting for input";
  if (task.status === "failed" && task.exit_code !== null && task.exit_code !== undefined) {
    return `failed · exit ${task.exit_code}`;
  }
  if (task.attempts > 1 && task.status !== "not_ready") return `${status} · try ${task.attempts}`;
  return status;
}
