"""The overview and the workflows page: what is running, failing and waiting, and how
that changed, in a handful of reads whatever the number of runs.

Every chart bucket is by the runs' creation: ``started`` counts the runs created in
it, ``completed`` and ``failed`` how many of those have since completed or failed
(failed, dead or timed out), so a bucket is exactly the runs list filtered by
``since``/``until`` and status. Counts of active statuses are of the runs in them
now; those of terminal statuses are of the runs created in the last day.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from durable.core.tallies import FAILURES, HOUR, MINUTE, RETRIED, TERMINAL, bucket
from durable.runtime.engine import Engine

from . import _queues, _schedules
from ._stats import RECENT, stats
from ._values import iso

#: Statuses counted as they are now (the rest: over the runs of the last day).
ACTIVE = ("queued", "running", "waiting", "blocked", "paused")
#: What the overview says about blocked runs.
BLOCKED_ADVICE = (
    "Runs are blocked when their code no longer matches their history. Run `durable "
    "check` to see which call diverged, then deploy code that matches, or fork the run."
)
#: The overview's windows: the last hour by minute, the last week by hour.
WEEK = 7 * 24 * 3600.0
#: How many tasks the overview lists as slowest and as most failing.
TOP = 5


def overview(engine: Engine) -> dict[str, Any]:
    """Counts by status, runs per minute (last hour) and per hour (last week), the
    workflows' figures, the slowest and most failing tasks, queues, schedules, and the
    blocked and dead runs (see the module docstring)."""
    backend = engine.backend
    now = backend.now()
    counts = backend.status_counts([*ACTIVE, "dead"])
    dead = counts.pop("dead")
    day = series(engine, HOUR, now - RECENT, now)
    counts.update(dict.fromkeys(TERMINAL, 0))
    for point in day["totals"].values():
        for status, count in point.items():
            if status in TERMINAL:
                counts[status] += count
    figures = stats(backend, since=now - WEEK, now=now)
    tasks = [figure for figure in figures if figure["kind"] == "task"]
    slowest = sorted(
        (f for f in tasks if f["p95_duration"] is not None),
        key=lambda f: (-f["p95_duration"], f["name"]),
    )
    failing = sorted((f for f in tasks if f["failed"]), key=lambda f: (-f["failed"], f["name"]))
    listed = [_schedules.view(engine, found) for found in backend.list_schedules()]
    return {
        "now": iso(now),
        "counts": counts,
        "counts_since": iso(bucket(now - RECENT, HOUR)),
        "minutes": series(engine, MINUTE, now - 3600 + MINUTE, now)["points"],
        "hours": series(engine, HOUR, now - WEEK + HOUR, now)["points"],
        "workflows": [f for f in figures if f["kind"] == "workflow"],
        "slowest_tasks": slowest[:TOP],
        "failing_tasks": failing[:TOP],
        "queues": _queues.views(engine),
        "schedules": sorted(listed, key=_next_fire),
        "blocked": {"count": counts["blocked"], "advice": BLOCKED_ADVICE},
        "dead": {"count": dead},
    }


def series(engine: Engine, grain: int, since: float, now: float) -> dict[str, Any]:
    """Runs started, completed and failed per *grain* bucket from the one holding
    *since* to the one holding *now* (``points``, oldest first, empty buckets too), and
    the counts by status class per bucket (``totals``)."""
    found = engine.backend.tallies(grain, since, kind="run", by_bin=False)
    totals: dict[float, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for tally in found:
        if tally.status != RETRIED:  # an erased attempt of a run counted already
            totals[tally.at][tally.status] += tally.count
    first, last = bucket(since, grain), bucket(now, grain)
    points = []
    at = first
    while at <= last:
        point = totals.get(at, {})
        points.append({
            "at": iso(at),
            "started": sum(point.values()),
            "completed": point.get("completed", 0),
            "failed": sum(point.get(status, 0) for status in FAILURES),
        })  # fmt: skip
        at += grain
    return {"points": points, "totals": totals}


def workflows(engine: Engine, *, since: float | None = None) -> dict[str, Any]:
    """Every workflow and task name with its figures since *since* (default: a week)
    and a sparkline: its runs (or calls) per hour over the last day, oldest first."""
    backend = engine.backend
    now = backend.now()
    start = now - WEEK if since is None else since
    figures = stats(backend, since=start, now=now)
    first = bucket(now - RECENT + HOUR, HOUR)
    hours = int((bucket(now, HOUR) - first) // HOUR) + 1
    spark: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0] * hours)
    for tally in backend.tallies(HOUR, first, by_bin=False):
        if tally.status == RETRIED:
            continue
        kind = "workflow" if tally.kind == "run" else "task"
        index = int((tally.at - first) // HOUR)
        if 0 <= index < hours:
            spark[kind, tally.name][index] += tally.count
    return {
        "since": iso(bucket(start, HOUR)),
        "items": [{**f, "spark": spark[f["kind"], f["name"]]} for f in figures],
    }


def _next_fire(schedule: dict[str, Any]) -> tuple[bool, str]:
    """Soonest first; paused and spent schedules (no next fire time) last."""
    at = schedule.get("next_fire_at")
    return at is None, at or ""
