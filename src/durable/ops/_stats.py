"""Statistics per workflow and per task, summed from the database's tallies.

The backend counts outcomes as they happen (`durable.core.tallies`); a figure here is
a sum over a few thousand tallies, so it costs the same at a thousand runs and at a
million. Windows are whole hours: ``since`` is taken back to the start of its hour,
and "the last day" is the 24 hours from the start of the hour a day ago; percentiles,
whose bins are tallied per day, are over whole days (UTC) from the start of since's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from durable.backends import Backend
from durable.core.tallies import BINNED, FAILURES, HOUR, OPEN, RETRIED, Tally, percentile

from ._values import iso

#: "Failures recently" means in the last day.
RECENT = 24 * 3600.0
_SUCCESS = "completed"
#: What counts as a failure here: an outcome that did not do its job, and an attempt
#: an operator's retry erased (all of them were failures).
_FAILED = (*FAILURES, RETRIED)


def stats(
    backend: Backend,
    *,
    since: float,
    now: float,
    kind: str | None = None,
    name: str | None = None,
    workflow: str | None = None,
) -> list[dict[str, Any]]:
    """One Stat per (kind, name) of the tallies that pass the filters, sorted by kind
    (workflows first) then name; each has its ``kind`` (``"workflow"`` or ``"task"``)."""
    chosen: dict[str, Any] = {"kind": kind, "name": name, "workflow": workflow}
    found = backend.tallies(HOUR, since, **chosen, by_bucket=False, by_bin=False)
    binned = backend.tallies(BINNED, since, **chosen, by_bucket=False)
    recent = backend.tallies(HOUR, now - RECENT, **chosen, by_bucket=False, by_bin=False)
    failing: dict[tuple[str, str], int] = defaultdict(int)
    for tally in recent:
        if tally.status in _FAILED:
            failing[tally.kind, tally.name] += tally.count
    grouped: dict[tuple[str, str], list[Tally]] = defaultdict(list)
    for tally in found:
        grouped[tally.kind, tally.name].append(tally)
    bins: dict[tuple[str, str], list[Tally]] = defaultdict(list)
    for tally in binned:
        if tally.bin >= 0:
            bins[tally.kind, tally.name].append(tally)
    return [
        {
            "kind": "workflow" if of == "run" else "task",
            **stat(called, grouped[of, called], bins[of, called]),
            "failures_24h": failing[of, called],
        }
        for of, called in sorted(grouped, key=lambda key: (key[0] != "run", key[1]))
    ]


def stat(name: str, tallies: Iterable[Tally], bins: Iterable[Tally] = ()) -> dict[str, Any]:
    """Runs (or calls), how many completed and failed (failed, dead or timed out),
    success % (of those that completed or failed; cancelled ones are neither, nor
    are runs that continued as new), average, p50 and p95 duration (bin bounds, see
    `durable.core.tallies`) and the last failure, of one name's tallies (*bins*:
    its tallies split by duration bin, for the percentiles; by default *tallies*).

    An attempt an operator's retry erased counts as the failure it was, in every
    figure but ``runs``, which counts runs (or calls), not attempts."""
    tallies = list(tallies)
    binned = [t for t in (bins or tallies) if t.bin >= 0]
    completed = sum(t.count for t in tallies if t.status == _SUCCESS)
    failed = sum(t.count for t in tallies if t.status in _FAILED)
    timed = [t for t in tallies if t.status != OPEN]  # ended: each has a duration
    durations = sum(t.count for t in timed)
    histogram = _histogram(binned)
    ended = completed + failed
    last = [t.last for t in tallies if t.status in _FAILED and t.last is not None]
    return {
        "name": name,
        "runs": sum(t.count for t in tallies if t.status != RETRIED),
        "completed": completed,
        "failed": failed,
        "success": round(100.0 * completed / ended, 2) if ended else None,
        "avg_duration": round(sum(t.seconds for t in timed) / durations, 6) if durations else None,
        "p50_duration": percentile(histogram, 0.5),
        "p95_duration": percentile(histogram, 0.95),
        "failures_24h": 0,
        "last_failure_at": iso(max(last)) if last else None,
    }


def _histogram(tallies: Sequence[Tally]) -> list[tuple[int, int]]:
    counts: dict[int, int] = defaultdict(int)
    for tally in tallies:
        counts[tally.bin] += tally.count
    return list(counts.items())
