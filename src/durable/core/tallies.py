"""Tallies: outcomes counted by time bucket, name, status and duration bin.

Statistics at a million runs cannot read a million rows per page load. The database
keeps them counted instead (a tally row per minute or hour, workflow or task, status
and duration bin, kept by the backend in the transaction that changes a run or a task
step), and every figure the dashboard and ``durable stats`` show is summed from a few
thousand tallies.

What is counted, and where:

* a **run** in the bucket of its creation, under its status class: ``open`` while it
  has not ended, its terminal status once it has (a run an operator retries moves back
  to ``open``); its duration is from its first start (or its creation) to its end.
* a **task** call that ended (completed or failed), in the hour of its start, under
  that status, with the workflow of its run. The SQL backends count a run's calls in
  a batch when its execution ends (it completes, fails, waits, is paused, blocked or
  handed back) and, while it runs, at each renewal of its lease, not at each step: a
  call of an execution still going shows a little later (the memory backend counts
  at once).
* an attempt an operator's retry erased (a failed run, a failed task call), under
  ``retried``: it counts as the failure it was in every figure but the number of runs
  (or calls), which the attempt that went on counts.

Durations are counted in bins, per day, so percentiles are those of the bins over
whole days: the p95 is the upper bound of the bin that holds the nearest-rank 95th
percentile, at most 12.2 % above the true value (bins grow by a factor of 10^(1/20)).
Averages are exact, and over whole hours like the counts.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .records import Outcome, Run

#: Tally grains: a minute (the last hour's charts), an hour (counts, averages, the
#: last failure) and a day (the duration bins too, for percentiles). Only day tallies
#: are split by duration bin: a week of hourly tallies per bin was 200,000 rows at a
#: million runs, a week of daily ones is a few thousand.
MINUTE = 60
HOUR = 3600
DAY = 86400
GRAINS = (MINUTE, HOUR, DAY)
#: The grain whose tallies are split by duration bin.
BINNED = DAY
#: The grains task calls are tallied in (no per-minute chart shows them).
TASK_GRAINS = (HOUR, DAY)

#: The status class of a run that has not ended.
OPEN = "open"
#: An attempt an operator's retry erased (a failed run or task call that went on): a
#: failure in every figure, but not another run or call.
RETRIED = "retried"
#: Run statuses that end a run.
TERMINAL = ("completed", "failed", "cancelled", "dead", "timed_out", "continued")
#: Outcomes that count as failures: the run or call did not do its job.
FAILURES = ("failed", "dead", "timed_out")
#: Task step statuses that are counted (the attempt ended).
TASK_ENDS = ("completed", "failed")

#: Duration bin upper bounds in whole microseconds: 20 per decade from 1 ms to about
#: 11.6 days (bin 0 holds everything up to 1 ms; the last bin everything above its
#: bound). Integers, so Python and both databases put a duration in the same bin.
BOUNDS_US: tuple[int, ...] = tuple(round(10 ** (3 + i / 20)) for i in range(20 * 9 + 1))


@dataclass(frozen=True, slots=True)
class Tally:
    """How many runs or task calls of one name, in one bucket, ended one way.

    *at* is the start of the bucket (of a run's creation, of a task call's start),
    *bin* the duration bin (-1: no duration, as for runs still open), *seconds* the
    sum of the durations, *last* the latest end among them (None: none ended)."""

    kind: str
    name: str
    workflow: str
    at: float
    status: str
    bin: int
    count: int
    seconds: float
    last: float | None


def bin_of(seconds: float) -> int:
    """The duration bin of *seconds*: the first bound at or above its whole
    microseconds (as the databases compute them)."""
    micros = math.floor(seconds * 1000000)
    return min(bisect.bisect_left(BOUNDS_US, micros), len(BOUNDS_US) - 1)


def bound(index: int) -> float:
    """The upper bound of duration bin *index*, in seconds."""
    return BOUNDS_US[index] / 1000000


def bucket(at: float, grain: int) -> float:
    """The start of the *grain*-second bucket holding *at*."""
    return float(math.floor(at / grain) * grain)


def percentile(bins: Sequence[tuple[int, int]], fraction: float) -> float | None:
    """The nearest-rank percentile of a histogram given as (bin, count) pairs in any
    order: the upper bound of the bin that holds it (None: no durations)."""
    total = sum(count for _, count in bins)
    if not total:
        return None
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for index, count in sorted(bins):
        seen += count
        if seen >= rank:
            return bound(index)
    raise AssertionError("unreachable: the ranks add up")  # pragma: no cover


def run_status(status: str) -> str:
    """The status class a run is tallied under."""
    return status if status in TERMINAL else OPEN


def merge(tallies: Iterable[Tally]) -> list[Tally]:
    """Tallies with the same key added up (what a GROUP BY over them gives)."""
    found: dict[tuple[str, str, str, float, str, int], Tally] = {}
    for tally in tallies:
        key = (tally.kind, tally.name, tally.workflow, tally.at, tally.status, tally.bin)
        old = found.get(key)
        if old is None:
            found[key] = tally
            continue
        last = [value for value in (old.last, tally.last) if value is not None]
        found[key] = Tally(
            *key,
            count=old.count + tally.count,
            seconds=old.seconds + tally.seconds,
            last=max(last) if last else None,
        )
    return [tally for tally in found.values() if tally.count]


def of_run(  # noqa: PLR0917 (the row's fields, as the trigger reads them)
    grain: int,
    workflow: str,
    status: str,
    created_at: float,
    started_at: float | None,
    finished_at: float | None,
) -> Tally:
    """A run's tally of *grain* (what the SQL triggers write for it)."""
    ended = status in TERMINAL and finished_at is not None
    binned = ended and grain == BINNED
    seconds = 0.0
    if ended and finished_at is not None:
        seconds = finished_at - (created_at if started_at is None else started_at)
    return Tally(
        kind="run",
        name=workflow,
        workflow=workflow,
        at=bucket(created_at, grain),
        status=run_status(status),
        bin=bin_of(seconds) if binned else -1,
        count=1,
        seconds=seconds,
        last=finished_at if ended else None,
    )


def of_task(  # noqa: PLR0917 (the row's fields, as the trigger reads them)
    grain: int,
    workflow: str,
    name: str,
    status: str,
    started_at: float | None,
    finished_at: float | None,
) -> Tally | None:
    """A task call's tally of *grain*, or None when it is not counted: it has not
    ended, has no start, or *grain* is not one task calls are tallied in."""
    if status not in TASK_ENDS or started_at is None or grain not in TASK_GRAINS:
        return None
    seconds = 0.0 if finished_at is None else finished_at - started_at
    return Tally(
        kind="task",
        name=name,
        workflow=workflow,
        at=bucket(started_at, grain),
        status=status,
        bin=bin_of(seconds) if finished_at is not None and grain == BINNED else -1,
        count=1,
        seconds=seconds,
        last=finished_at,
    )


def of_retried(
    grain: int, kind: str, outcome: Outcome, workflow: str, run: Run | None
) -> list[Tally]:
    """The tally of an attempt an operator's retry erased (*outcome*, of a run or a
    task call of a run of *workflow*), if it is counted in *grain*: a run's in the
    bucket of the creation of *run* (gone: not counted), a task call's in the hour of
    its start."""
    if outcome.started_at is None or (kind == "task" and grain not in TASK_GRAINS):
        return []
    if kind == "run" and run is None:
        return []
    at = run.created_at if kind == "run" and run is not None else outcome.started_at
    timed = outcome.finished_at is not None
    seconds = outcome.finished_at - outcome.started_at if outcome.finished_at is not None else 0.0
    return [
        Tally(
            kind=kind,
            name=outcome.name,
            workflow=workflow,
            at=bucket(at, grain),
            status=RETRIED,
            bin=bin_of(seconds) if timed and grain == BINNED else -1,
            count=1,
            seconds=seconds,
            last=outcome.finished_at,
        )
    ]


def select(
    found: Iterable[Tally],
    grain: int,
    since: float,
    *,
    kind: str | None = None,
    name: str | None = None,
    workflow: str | None = None,
    by_bucket: bool = True,
    by_bin: bool = True,
) -> list[Tally]:
    """`TallyStore.tallies` over the tallies of one grain in memory: those from the
    bucket of *since* on that pass the filters, added up (over buckets too, unless
    *by_bucket*: their ``at`` is then that first bucket's; over bins too, unless
    *by_bin*: their ``bin`` is then -1)."""
    start = bucket(since, grain)
    kept = [
        tally
        for tally in found
        if tally.at >= start
        and (kind is None or tally.kind == kind)
        and (name is None or tally.name == name)
        and (workflow is None or tally.workflow == workflow)
    ]
    return merge(
        Tally(
            t.kind,
            t.name,
            t.workflow,
            t.at if by_bucket else start,
            t.status,
            t.bin if by_bin else -1,
            t.count,
            t.seconds,
            t.last,
        )
        for t in kept
    )
