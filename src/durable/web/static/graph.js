/* The run graph as SVG, drawn from the server's layout (GET api/v1/runs/<id>/graph).

   The server decides everything (layers, shapes, states, coordinates); this module only
   paints. Nodes and edges are kept in maps by id and updated in place on each poll, so
   an open panel, keyboard focus and references held by tests stay valid, and the
   <defs> (the arrow marker) are made once, outside the groups that change. */

import { svg } from "./dom.js";

export class GraphView {
  /* onSelect(nodeId) is called when a box with a position is clicked or activated with
     Enter or Space; start and end are not selectable. */
  constructor(box, onSelect) {
    this.root = svg("svg", { class: "graph", role: "group", "aria-label": "Run graph" });
    const marker = svg("marker", {
      id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse",
    });
    marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }));
    const defs = svg("defs");
    defs.append(marker);
    this.edgeLayer = svg("g", { class: "edges" });
    this.nodeLayer = svg("g", { class: "nodes" });
    this.root.append(defs, this.edgeLayer, this.nodeLayer);
    this.nodes = new Map();
    this.edges = new Map();
    const pick = (target) => {
      const node = target.closest("g.node");
      if (node && node.getAttribute("data-clickable") === "true") {
        onSelect(node.getAttribute("data-id"));
      }
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

  /* Paint *graph*; *steps* (the run's history) add what only the steps know: a running
     task's progress bar, and which failed steps timed out. */
  update(graph, steps) {
    this.root.setAttribute("viewBox", `0 0 ${graph.width} ${graph.height}`);
    this.root.setAttribute("width", graph.width);
    this.root.setAttribute("height", graph.height);
    const byId = new Map(graph.nodes.map((node) => [node.id, node]));
    const byPosition = new Map((steps || []).map((step) => [step.position, step]));
    sync(this.nodes, graph.nodes, (node) => node.id, this.nodeLayer,
      () => svg("g"), (g, node) => paintNode(g, node, byPosition.get(node.position)));
    sync(this.edges, graph.edges, (edge) => `${edge.from}\u2192${edge.to}`, this.edgeLayer,
      () => svg("path", { "marker-end": "url(#arrow)" }),
      (path, edge) => paintEdge(path, byId.get(edge.from), byId.get(edge.to)));
  }

  /* Mark the box *id* as the one the side panel shows (null: none). */
  select(id) {
    for (const [key, g] of this.nodes) g.classList.toggle("selected", key === id);
  }
}

/* Keyed in-place update of SVG children: reuse, create, drop. */
function sync(elements, items, keyOf, parent, make, paint) {
  const seen = new Set();
  for (const item of items) {
    const key = keyOf(item);
    seen.add(key);
    let element = elements.get(key);
    if (!element) {
      element = make();
      elements.set(key, element);
      parent.append(element);
    }
    paint(element, item);
  }
  for (const [key, element] of elements) {
    if (!seen.has(key)) {
      element.remove();
      elements.delete(key);
    }
  }
}

const TERMINALS = new Set(["start", "end"]);
/* The progress bar's inset from the box's sides and bottom, and its height. */
const BAR_INSET = 12;
const BAR_HEIGHT = 4;

/* *step* is the recorded step at the node's position (undefined for the others). */
function paintNode(g, node, step) {
  // The outline is redrawn only when the shape changes (the "running" box becomes the
  // recorded step, which may be a sleep or an event); the <g> itself always stays.
  const geometry = `${node.shape}:${node.w}x${node.h}`;
  const terminal = TERMINALS.has(node.shape);
  if (g.getAttribute("data-geometry") !== geometry) {
    const label = svg("text", {
      class: "label", x: node.w / 2, y: terminal ? node.h / 2 + 4 : node.h / 2 - 3,
    });
    const detail = svg("text", { class: "detail", x: node.w / 2, y: node.h / 2 + 14 });
    g.replaceChildren(...outline(node), label, detail, svg("title"));
    g.setAttribute("data-geometry", geometry);
  }
  const clickable = node.position !== null;
  const timedOut = Boolean(step && step.timed_out);
  const attrs = {
    class: `node state-${node.state} shape-${node.shape}${timedOut ? " timed-out" : ""}`,
    transform: `translate(${node.x} ${node.y})`,
    "data-id": node.id,
    "data-state": node.state,
    "data-kind": node.kind,
    "data-shape": node.shape,
    "data-clickable": String(clickable),
    "data-timed-out": String(timedOut),
    "aria-label": `${node.label}: ${timedOut ? "timed out" : node.state}`,
  };
  for (const [name, value] of Object.entries(attrs)) g.setAttribute(name, value);
  if (clickable) {
    g.setAttribute("data-position", node.position);
    g.setAttribute("tabindex", "0");
    g.setAttribute("role", "button");
  }
  const [label, detail, title] = Array.from(g.children).slice(-3);
  label.textContent = node.label;
  detail.textContent = terminal ? "" : node.detail;
  title.textContent = `${node.name} (${timedOut ? "timed out" : node.state})`;
  paintProgress(g, node, step, label);
}

/* A running task that reported progress (durable.heartbeat({"done": n, "of": m})) gets
   a bar along the bottom of its box; the layout already put the percentage in its
   detail line. Any other box has none. */
function paintProgress(g, node, step, label) {
  const running = node.state === "running" && step && step.status === "running";
  const fraction = running && typeof step.progress === "number" ? step.progress : null;
  let bar = g.querySelector(":scope > g.progress");
  if (fraction === null) {
    if (bar) bar.remove();
    return;
  }
  const width = node.w - 2 * BAR_INSET;
  if (!bar) {
    bar = svg("g", {
      class: "progress", transform: `translate(${BAR_INSET} ${node.h - BAR_HEIGHT - 4})`,
    });
    bar.append(
      svg("rect", { class: "progress-track", width, height: BAR_HEIGHT, rx: BAR_HEIGHT / 2 }),
      svg("rect", { class: "progress-bar", width: 0, height: BAR_HEIGHT, rx: BAR_HEIGHT / 2 }),
    );
    g.insertBefore(bar, label);
  }
  const clamped = Math.min(Math.max(fraction, 0), 1);
  bar.setAttribute("data-progress", String(clamped));
  bar.lastChild.setAttribute("width", (clamped * width).toFixed(1));
}

/* The outline of a box: pills for start and end, a hexagon for a sleep, a box with an
   envelope for an event, a double border for a child workflow. */
function outline(node) {
  const { w, h } = node;
  if (TERMINALS.has(node.shape)) {
    return [svg("rect", { class: "shape", width: w, height: h, rx: h / 2 })];
  }
  if (node.shape === "wait") {
    const points = [[12, 0], [w - 12, 0], [w, h / 2], [w - 12, h], [12, h], [0, h / 2]];
    return [svg("polygon", { class: "shape", points: points.map((p) => p.join(",")).join(" ") })];
  }
  const box = svg("rect", { class: "shape", width: w, height: h, rx: 6 });
  if (node.shape === "child") {
    return [box, svg("rect", { class: "inner", x: 4, y: 4, width: w - 8, height: h - 8, rx: 4 })];
  }
  if (node.shape === "event") {
    const x = w - 24;
    return [box, svg("rect", { class: "icon", x, y: 6, width: 16, height: 11, rx: 1 }),
      svg("polyline", { class: "icon", points: `${x},6 ${x + 8},12 ${x + 16},6` })];
  }
  return [box];
}

/* A curve from the bottom middle of *from* to the top middle of *to*. */
function paintEdge(path, from, to) {
  if (!from || !to) return;
  const x1 = from.x + from.w / 2;
  const y1 = from.y + from.h;
  const x2 = to.x + to.w / 2;
  const y2 = to.y;
  const bend = (y2 - y1) / 2;
  path.setAttribute("d", `M ${x1} ${y1} C ${x1} ${y1 + bend} ${x2} ${y2 - bend} ${x2} ${y2}`);
  path.setAttribute("class", to.state === "not-reached" ? "edge pending" : "edge");
}
