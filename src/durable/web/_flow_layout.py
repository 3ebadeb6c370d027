"""Where each box of a process flow goes: a layered layout of its DAG, from its file.

`layout_flow` is a pure function of the flow's *structure* (task names in file order and
their ``depends_on``), never of statuses or timings, so the picture does not move while
a flow runs: the dashboard draws it once and then only recolours boxes. The same
structure always gives the same picture (no randomness, stable sorts), and it is
cached, since every poll of every viewer asks again.

The method is the classic one (Sugiyama), kept linear so that 1,000 tasks and 2,000
dependencies lay out in tens of milliseconds:

1. **Layers**: a task's layer is the longest path to it from a task with no
   dependencies, so every arrow points down.
2. **Virtual points**: an arrow spanning several layers gets one point per layer it
   crosses; those points take a narrow slot in their layer, so long arrows run between
   boxes, not through them.
3. **Order**: a few barycenter sweeps, down then up: each layer is sorted by the mean
   position of its neighbours in the layer before, which removes most crossings.
4. **Coordinates**: boxes are packed in order, then pulled toward the mean x of their
   neighbours while keeping their spacing, so arrows run mostly straight down.

Each pass touches every node and every segment once: O(V + E + virtual points).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["layout_flow"]

#: Box sizes in px; the browser scales the picture only if it must.
BOX_W, BOX_H = 168, 44
#: The width an arrow's virtual point takes in its layer.
LANE_W = 14
GAP_X, GAP_Y, MARGIN = 28, 56, 24
#: Barycenter sweeps (each one down and one up) and coordinate passes.
SWEEPS = 4
STRAIGHTEN = 3
#: Structures laid out recently (a flow is polled every few seconds by each viewer).
CACHED = 64

Structure = tuple[tuple[str, tuple[str, ...]], ...]


def layout_flow(view: Mapping[str, Any]) -> dict[str, Any]:
    """Lay out the DAG of a flow.

    Args:
        view: a flow as ``ops.flows.view`` gives it; only each task's "name" and
            "depends_on" are read. Unknown dependency names are ignored; a cycle (which
            loading a flow refuses) is laid out anyway, its back arrows drawn straight.

    Returns:
        ``{"key", "width", "height", "layers", "nodes", "edges"}``. *key* names the
        structure: equal keys mean an identical picture, so a client redraws only when
        it changes. *nodes* are ``{"name", "layer", "x", "y", "w", "h"}`` in the file's
        order; *edges* are ``{"from", "to", "points"}``, one per dependency, *points* a
        polyline ``[[x, y], ...]`` from the bottom middle of the dependency's box to the
        top middle of the dependent's. The dict is cached and shared with later calls
        for the same structure: read it, do not change it.
    """
    structure: Structure = tuple(
        (str(task["name"]), tuple(str(name) for name in task.get("depends_on") or ()))
        for task in view["tasks"]
    )
    return _cached(structure)


@functools.lru_cache(maxsize=CACHED)
def _cached(structure: Structure) -> dict[str, Any]:
    return _Layout(structure).result()


class _Layout:
    """One layout in progress. Nodes are integers: tasks 0..n-1 in file order, then the
    virtual points of long arrows."""

    def __init__(self, structure: Structure) -> None:
        self.structure = structure
        self.names = [name for name, _ in structure]
        index: dict[str, int] = {}
        for number, name in enumerate(self.names):
            index.setdefault(name, number)  # a duplicate name: the first one wins
        self.deps = [
            list(dict.fromkeys(index[name] for name in deps if name in index and name != own))
            for own, deps in structure
        ]
        self.layer = _layers(self.deps)
        count = len(self.names)
        self.dependents: list[list[int]] = [[] for _ in range(count)]
        for target, sources in enumerate(self.deps):
            for source in sources:
                self.dependents[source].append(target)
        self.up: list[list[int]] = [[] for _ in range(count)]
        self.down: list[list[int]] = [[] for _ in range(count)]
        #: per dependency (dependency, dependent): the chain of nodes its arrow follows
        self.chains: list[tuple[int, int, list[int]]] = []
        trunks = [self._trunk(source) for source in range(count)]
        for target, sources in enumerate(self.deps):
            for source in sources:
                self.chains.append((source, target, self._chain(source, target, trunks[source])))
        depth = max(self.layer, default=-1) + 1
        self.layers: list[list[int]] = [[] for _ in range(depth)]
        for node, layer in enumerate(self.layer):
            self.layers[layer].append(node)
        self.position = [0] * len(self.layer)
        self._number()
        self.x = [0.0] * len(self.layer)
        self.gaps: list[list[float]] = []
        self.widest = 0.0

    def _trunk(self, source: int) -> list[int]:
        """The virtual nodes the long arrows out of *source* share: one per layer down to
        the one above its deepest dependent. Sharing them bundles the arrows of a task
        with many dependents into one lane that branches off where each is."""
        deepest = max((self.layer[target] for target in self.dependents[source]), default=0)
        trunk: list[int] = []
        for layer in range(self.layer[source] + 1, deepest):
            virtual = len(self.layer)
            self.layer.append(layer)
            self.up.append([])
            self.down.append([])
            self._link(trunk[-1] if trunk else source, virtual)
            trunk.append(virtual)
        return trunk

    def _chain(self, source: int, target: int, trunk: list[int]) -> list[int]:
        """The nodes the arrow from *source* to *target* passes: down *source*'s trunk
        to the layer above *target*, then into it."""
        span = self.layer[target] - self.layer[source]
        if span < 1:
            return [source, target]  # a back arrow (a cycle): drawn straight, not routed
        chain = [source, *trunk[: span - 1], target]
        self._link(chain[-2], target)
        return chain

    def _link(self, upper: int, lower: int) -> None:
        self.down[upper].append(lower)
        self.up[lower].append(upper)

    def _number(self) -> None:
        """Each node's place in its layer, as the layers list them now."""
        for nodes in self.layers:
            for place, node in enumerate(nodes):
                self.position[node] = place

    def result(self) -> dict[str, Any]:
        """Order, place, and describe the picture."""
        for _ in range(SWEEPS):
            self._sweep(range(1, len(self.layers)), self.up)
            self._sweep(range(len(self.layers) - 2, -1, -1), self.down)
        self._pack()
        for _ in range(STRAIGHTEN):
            self._straighten(range(1, len(self.layers)), self.up)
            self._straighten(range(len(self.layers) - 2, -1, -1), self.down)
        return self._describe()

    def _sweep(self, layers: Iterable[int], neighbours: list[list[int]]) -> None:
        """Sort each layer by the mean position of each node's *neighbours* (in the
        layer the sweep comes from); a node without any keeps its place."""
        position = self.position
        for layer in layers:
            nodes = self.layers[layer]
            decorated = sorted(
                (
                    sum([position[other] for other in near]) / len(near)
                    if (near := neighbours[node])
                    else position[node],
                    position[node],
                    node,
                )
                for node in nodes
            )
            nodes[:] = [node for _, _, node in decorated]
            for place, node in enumerate(nodes):
                position[node] = place

    def _width(self, node: int) -> int:
        return BOX_W if node < len(self.names) else LANE_W

    def _gaps(self, nodes: list[int]) -> list[float]:
        """The least distance between the centres of each two neighbours in a layer."""
        count = len(self.names)
        gaps = []
        for left, right in itertools.pairwise(nodes):
            both_boxes = left < count and right < count
            gap = GAP_X if both_boxes else GAP_X / 2
            gaps.append((self._width(left) + self._width(right)) / 2 + gap)
        return gaps

    def _pack(self) -> None:
        """Centres side by side at their least distance, every layer centred."""
        self.gaps = [self._gaps(nodes) for nodes in self.layers]
        spans = []
        for nodes, gaps in zip(self.layers, self.gaps, strict=True):
            x = 0.0
            for node, gap in zip(nodes, [0.0, *gaps], strict=True):
                x += gap
                self.x[node] = x
            spans.append(x)
        self.widest = max(spans, default=0.0)
        for nodes, span in zip(self.layers, spans, strict=True):
            for node in nodes:
                self.x[node] += (self.widest - span) / 2

    def _straighten(self, layers: Iterable[int], neighbours: list[list[int]]) -> None:
        """Move each node toward the mean x of its *neighbours*, keeping the order, the
        spacing and the widest layer's span: the mean of the tightest fits from the left
        and from the right, each clamped between the layer packed left and packed right
        (so the picture never grows)."""
        x = self.x
        for layer in layers:
            nodes, gaps = self.layers[layer], self.gaps[layer]
            if not nodes:
                continue
            lowest = list(itertools.accumulate(gaps, initial=0.0))
            slack = self.widest - lowest[-1]
            wanted = [
                sum([x[other] for other in near]) / len(near)
                if (near := neighbours[node])
                else x[node]
                for node in nodes
            ]
            left = wanted[:]
            for i in range(len(nodes)):
                at = left[i - 1] + gaps[i - 1] if i else 0.0
                high = lowest[i] + slack
                left[i] = high if left[i] > high else at if left[i] < at else left[i]
            right = wanted[:]
            for i in range(len(nodes) - 1, -1, -1):
                at = right[i + 1] - gaps[i] if i < len(gaps) else self.widest
                low = lowest[i]
                right[i] = low if right[i] < low else at if right[i] > at else right[i]
            for node, a, b in zip(nodes, left, right, strict=True):
                x[node] = (a + b) / 2

    def _describe(self) -> dict[str, Any]:
        """The picture in whole pixels, shifted so that it starts MARGIN from the left."""
        width = self._width
        shift = MARGIN - min((x - width(node) / 2 for node, x in enumerate(self.x)), default=0)
        centre = [round(x + shift) for x in self.x]
        top = [MARGIN + layer * (BOX_H + GAP_Y) for layer in self.layer]
        right = max((x + width(node) / 2 for node, x in enumerate(centre)), default=0)
        nodes = [
            {"name": name, "layer": self.layer[node], "x": centre[node] - BOX_W // 2,
             "y": top[node], "w": BOX_W, "h": BOX_H}
            for node, name in enumerate(self.names)
        ]  # fmt: skip
        edges = []
        for source, target, chain in self.chains:
            points = [[centre[source], top[source] + BOX_H]]
            for virtual in chain[1:-1]:
                # straight down through the layer, in the lane between its boxes
                points += [[centre[virtual], top[virtual]], [centre[virtual], top[virtual] + BOX_H]]
            points.append([centre[target], top[target]])
            edges.append({"from": self.names[source], "to": self.names[target], "points": points})
        return {
            "key": _key(self.structure),
            "width": round(right) + MARGIN,
            "height": max(len(self.layers) * (BOX_H + GAP_Y) - GAP_Y, 0) + 2 * MARGIN,
            "layers": len(self.layers),
            "nodes": nodes,
            "edges": edges,
        }


def _layers(deps: Sequence[Sequence[int]]) -> list[int]:
    """Each node's longest distance from a node without dependencies (Kahn's order).
    Nodes left in a cycle go below everything they depend on that has a layer."""
    count = len(deps)
    children: list[list[int]] = [[] for _ in range(count)]
    waiting = [len(sources) for sources in deps]
    for node, sources in enumerate(deps):
        for source in sources:
            children[source].append(node)
    layer = [-1] * count
    ready = [node for node in range(count) if waiting[node] == 0]
    for node in ready:  # grows while it is walked: a queue in file order
        layer[node] = max((layer[source] + 1 for source in deps[node]), default=0)
        for child in children[node]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    for node in range(count):
        if layer[node] < 0:  # in (or below) a cycle
            layer[node] = max((layer[source] + 1 for source in deps[node]), default=0)
    return layer


def _key(structure: Structure) -> str:
    """A short name of *structure*: equal for equal structures, for clients to compare."""
    digest = hashlib.sha256()
    for name, deps in structure:
        digest.update(name.encode("utf-8", "backslashreplace") + b"\x00")
        for dep in deps:
            digest.update(dep.encode("utf-8", "backslashreplace") + b"\x01")
        digest.update(b"\x02")
    return digest.hexdigest()[:16]
