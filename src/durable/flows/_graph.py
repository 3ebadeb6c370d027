"""The dependency graph of a flow's tasks: a topological order and, when there is
none, the cycle that prevents it.

Both walk iteratively (a heap and an explicit stack), so a chain of any depth works
where recursion would overflow at a thousand.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence


def dependents(deps: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Each task's direct dependents, in the order of *deps* (file order)."""
    result: dict[str, list[str]] = {name: [] for name in deps}
    for name, needs in deps.items():
        for need in dict.fromkeys(needs):
            result[need].append(name)
    return result


def order(deps: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A topological order of *deps* (dependencies first; among tasks ready together,
    file order first), or None when there is a cycle. Every dependency must be a key."""
    index = {name: position for position, name in enumerate(deps)}
    waiting = {name: len(set(needs)) for name, needs in deps.items()}
    after = dependents(deps)
    ready = [index[name] for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    names = list(deps)
    result: list[str] = []
    while ready:
        name = names[heapq.heappop(ready)]
        result.append(name)
        for follower in after[name]:
            waiting[follower] -= 1
            if waiting[follower] == 0:
                heapq.heappush(ready, index[follower])
    return result if len(result) == len(names) else None


def cycle(deps: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle of *deps* as ``[a, b, c, a]`` (each depends on the next), starting from
    its task first in file order; None when there is none."""
    index = {name: position for position, name in enumerate(deps)}
    done: set[str] = set()
    for start in deps:
        if start in done:
            continue
        path: list[str] = [start]
        on_path = {start: 0}
        pending: list[list[str]] = [list(reversed(deps[start]))]
        while pending:
            if not pending[-1]:
                pending.pop()
                finished = path.pop()
                del on_path[finished]
                done.add(finished)
                continue
            need = pending[-1].pop()
            if need in on_path:
                loop = path[on_path[need] :]
                first = min(range(len(loop)), key=lambda i: index[loop[i]])
                loop = loop[first:] + loop[:first]
                return [*loop, loop[0]]
            if need not in done:
                on_path[need] = len(path)
                path.append(need)
                pending.append(list(reversed(deps[need])))
    return None
