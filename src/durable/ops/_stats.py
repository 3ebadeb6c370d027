"""Statistics over outcomes: per workflow and per task, how many, how well, how long."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from durable.core.records import Outcome

from ._values import iso

#: "Failures recently" means in the last day.
RECENT = 24 * 3600.0
_SUCCESS = "completed"
#: A run that reached its deadline did not do its job either: it counts as a failure.
_FAILURE = ("failed", "dead", "timed_out")


def stats(outcomes: Iterable[Outcome], *, now: float) -> list[dict[str, Any]]:
    """One Stat per name, sorted by name."""
    by_name: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_name.setdefault(outcome.name, []).append(outcome)
    return [stat(name, found, now=now) for name, found in sorted(by_name.items())]


def stat(name: str, outcomes: Sequence[Outcome], *, now: float) -> dict[str, Any]:
    """Runs, success % (of the attempts that completed or failed, died or timed out;
    cancelled ones are neither, and so are runs that continued as new: each link of a
    chain is a run, and the chain's outcome is its last one's), average and
    95th-percentile duration, and failures in the last day.

    An attempt an operator's retry erased (``retried``) counts as the failure it was,
    in every figure but ``runs``, which counts runs (or calls), not attempts."""
    completed = sum(1 for o in outcomes if o.status == _SUCCESS)
    failures = [o for o in outcomes if o.status in _FAILURE]
    durations = sorted(
        o.finished_at - o.started_at
        for o in outcomes
        if o.started_at is not None and o.finished_at is not None
    )
    ended = completed + len(failures)
    last_failure = max((o.finished_at or 0.0 for o in failures), default=None)
    return {
        "name": name,
        "runs": sum(1 for o in outcomes if not o.retried),
        "completed": completed,
        "failed": len(failures),
        "success": round(100.0 * completed / ended, 2) if ended else None,
        "avg_duration": round(sum(durations) / len(durations), 6) if durations else None,
        "p95_duration": round(_percentile(durations, 0.95), 6) if durations else None,
        "failures_24h": sum(1 for o in failures if (o.finished_at or 0.0) >= now - RECENT),
        "last_failure_at": iso(last_failure) if failures else None,
    }


def _percentile(ordered: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of an ascending sequence."""
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]
