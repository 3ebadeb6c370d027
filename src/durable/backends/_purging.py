"""Which old finished runs may be purged: the family rule, shared by every backend.

A run finished before the cutoff may go only if every run above it that is still
stored (parent, grandparent...) and every run below it (children, grandchildren...)
finished before the cutoff too: a live parent's replay reads its children, and
cancelling a run must still reach its live descendants. A parent that is gone (purged
earlier) ends the walk up. Backends hand in their candidates and two lookups, and
read the relatives a generation at a time, which suits indexed queries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

#: (run id, parent id, finished before the cutoff?)
Relative = tuple[str, str | None, bool]
#: Looks up runs by a list of ids: by their own id, or by their parent's.
Lookup = Callable[[list[str]], Iterable[Relative]]

#: The most ids one lookup receives.
CHUNK = 1000


def may_go(
    candidates: Sequence[tuple[str, str | None]], *, runs: Lookup, children: Lookup
) -> set[str]:
    """The ids of *candidates* (runs finished before the cutoff, as (id, parent id))
    whose stored ancestors and descendants all finished before the cutoff too.

    Args:
        runs: returns the runs with the given ids (those that exist).
        children: returns the runs whose parent is one of the given ids.
    """
    above: dict[str, Relative] = {}
    wanted = {parent for _, parent in candidates if parent is not None}
    asked: set[str] = set()
    while wanted:
        asked |= wanted
        found = _chunked(runs, sorted(wanted))
        above.update((relative[0], relative) for relative in found)
        wanted = {parent for _, parent, _ in found if parent is not None} - asked

    below: dict[str, list[Relative]] = {}
    frontier = [run_id for run_id, _ in candidates]
    seen = set(frontier)
    while frontier:
        found = _chunked(children, frontier)
        for relative in found:
            below.setdefault(relative[1] or "", []).append(relative)
        frontier = [run_id for run_id, _, _ in found if run_id not in seen]
        seen.update(frontier)

    def line_done(run_id: str, parent: str | None) -> bool:
        visited: set[str] = set()
        while parent is not None and parent in above and parent not in visited:
            visited.add(parent)
            _, parent_of_parent, done = above[parent]
            if not done:
                return False
            parent = parent_of_parent
        stack = [run_id]
        visited = {run_id}
        while stack:
            for child, _, done in below.get(stack.pop(), ()):
                if not done:
                    return False
                if child not in visited:
                    visited.add(child)
                    stack.append(child)
        return True

    return {run_id for run_id, parent in candidates if line_done(run_id, parent)}


def _chunked(lookup: Lookup, ids: list[str]) -> list[Relative]:
    found: list[Relative] = []
    for start in range(0, len(ids), CHUNK):
        found += lookup(ids[start : start + CHUNK])
    return found
