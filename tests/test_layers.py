"""The package's floors: every module imports only from its own layer or the ones below,
no two modules import each other (directly or round a circle), and none is long.

Every import counts: at module level, inside functions, under ``TYPE_CHECKING``. The
layer table is the one in docs/architecture.md; change both together.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import durable

SRC = Path(durable.__file__).resolve().parent
#: No module may be longer than this many lines: split by concept (never into "utils").
MAX_LINES = 400

#: Lowest first. A module may import modules of its own layer and of layers before it.
#: A prefix names a package and everything in it; "durable" alone is the facade module.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("durable.errors",)),
    ("core", ("durable.core",)),
    ("backends", ("durable.backends",)),
    ("runtime", ("durable.runtime",)),
    ("api", ("durable.api", "durable")),
    ("flows", ("durable.flows",)),
    ("ops", ("durable.ops",)),
    ("surfaces", ("durable.cli", "durable.web", "durable.testing", "durable.__main__")),
)


def modules(root: Path = SRC) -> dict[str, Path]:
    """Every module under *root*, by dotted name (a package by its own name)."""
    found = {}
    for path in root.rglob("*.py"):
        parts = ("durable", *path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def layer_of(module: str) -> int | None:
    """The rank of *module*'s layer in `LAYERS`, by its longest matching prefix."""
    best: tuple[int, int] | None = None  # (prefix length, rank)
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            inside = prefix != "durable" and module.startswith(prefix + ".")
            if (module == prefix or inside) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank)
    return None if best is None else best[1]


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The durable modules *module* imports, anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            names = {f"{base}.{alias.name}" for alias in node.names}
            submodules = names & known.keys()
            found.update(submodules)
            if submodules != names or not module.startswith(base + "."):
                # Names defined by *base* itself, or a package other than our own: its
                # module (its __init__) runs and is used.
                found.add(base)
    return {name for name in found if name in known and name != module}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {module: imports(module, path, known) for module, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> Iterator[tuple[list[str], set[str]]]:
    """Each group of modules that import each other (round a circle), with one
    concrete cycle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)

    for module in sorted(edges):
        if module not in index:
            visit(module)
    for group in groups:
        yield _path_round(min(group), group, edges), group


def _path_round(start: str, group: set[str], edges: dict[str, set[str]]) -> list[str]:
    """The shortest import path from *start* back to itself inside *group*."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges[node] & group):
                if child == start:
                    return [*paths[node], start]
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a group always has one


def test_every_module_has_a_layer() -> None:
    """A new package goes into the table (and docs/architecture.md) before it lands."""
    unplaced = sorted(module for module in modules() if layer_of(module) is None)
    assert not unplaced, f"modules outside every layer of LAYERS: {unplaced}"


def test_no_import_cycles() -> None:
    found = [
        " -> ".join(cycle) + (f"  (one of a group of {len(group)}: {', '.join(sorted(group))})")
        for cycle, group in cycles(graph())
    ]
    assert not found, "modules that import each other:\n" + "\n".join(found)


def test_imports_point_down() -> None:
    """No module imports one from a higher layer."""
    upward = []
    for module, targets in sorted(graph().items()):
        rank = layer_of(module)
        for target in sorted(targets):
            other = layer_of(target)
            if rank is not None and other is not None and other > rank:
                upward.append(f"{module} ({LAYERS[rank][0]}) imports {target} ({LAYERS[other][0]})")
    assert not upward, "imports from a lower layer into a higher one:\n" + "\n".join(upward)


def test_modules_are_short() -> None:
    long = {
        module: lines
        for module, path in modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by concept): {long}"


def test_the_checks_see_what_they_must(tmp_path: Path) -> None:
    """The parser finds imports in functions and under TYPE_CHECKING, relative or not,
    and the layer table ranks what it should."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..runtime.engine import Engine\n"
        "def late():\n    from durable.api import handles\n    import durable.cli.main\n"
        "from . import hashing\nfrom durable import Run\n"
    )
    known = dict.fromkeys(
        (
            "durable",
            "durable.core",
            "durable.core.hashing",
            "durable.runtime.engine",
            "durable.api",
            "durable.api.handles",
            "durable.cli.main",
        ),
        SRC,
    )
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    found = imports("durable.core.probe", probe, known)
    assert found == {
        "durable.runtime.engine",
        "durable.api",
        "durable.api.handles",
        "durable.cli.main",
        "durable.core.hashing",
        "durable",  # `from durable import Run` uses the facade itself
    }
    assert [layer_of(m) for m in ("durable.errors", "durable.core.x", "durable")] == [0, 1, 4]
    assert layer_of("durable.cli.main") == 7 and layer_of("durable.nowhere") is None
    assert list(cycles({"a": {"b"}, "b": {"c", "a"}, "c": {"a"}, "d": {"a"}})) == [
        (["a", "b", "a"], {"a", "b", "c"})
    ]
