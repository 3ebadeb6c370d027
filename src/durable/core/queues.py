"""Flow control: the limits a queue declares, checked, and the arithmetic of its rate.

A `Queue` is what the database keeps (`QueueStore`): at most ``concurrency`` runs of the
queue running at once, at most ``key_concurrency`` running per key (a run's ``key``,
given at dispatch; a run may carry its own limit), at most ``rate`` run starts in any
window of ``per`` seconds, and at most ``key_rate`` starts per key in any window of
``key_per`` seconds. The backends enforce them in the claim (see
docs/concepts/flow-control.md); this module holds only values and pure rules.

The rate is a **sliding-window log**: the queue keeps the start times of its last
``rate`` starts, and a run may start at *now* only if fewer than ``rate`` of them lie in
``(now - per, now]``. So no window of ``per`` seconds ever holds more than ``rate``
starts (a token bucket would allow twice that across a refill), and a late claim does
not slow the ones after it. A burst of ``rate`` starts at once is within the limit;
declare ``rate=(1, per / n)`` for evenly spaced starts.

A key's rate is the same sliding window, counted from the runs themselves: the runs of
the key whose first start (``started_at``) lies in the window. No log is kept per key
(there may be millions of keys); purging a run started inside the window forgets its
start.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .durations import seconds
from .records import Run, RunStatus
from .run_options import check_queue

#: The largest limit or rate a queue may declare (int4 in the database).
LIMIT_MAX = 2**31 - 1
#: The most starts a rate may allow per window: its log is kept in the queue's row.
RATE_MAX = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Queue:
    """A queue's limits; None means unlimited."""

    name: str
    #: runs of the queue running at once, across all workers.
    concurrency: int | None = None
    #: runs running at once per key, for runs dispatched with a key and no limit of their own.
    key_concurrency: int | None = None
    #: run starts allowed in any window of `per` seconds.
    rate: int | None = None
    per: float | None = None
    #: starts allowed per key (runs dispatched with ``key=``) in any window of `key_per`.
    key_rate: int | None = None
    key_per: float | None = None


def make_queue(
    name: object,
    *,
    concurrency: object = None,
    key_concurrency: object = None,
    rate: object = None,
    key_rate: object = None,
) -> Queue:
    """A `Queue` from what a user wrote, checked.

    *rate* and *key_rate* are ``(starts, period)``, the period a timedelta or seconds.

    Raises:
        TypeError, ValueError: a field is of the wrong type or out of range (the
            message names it and says what to write).
    """
    count, per = _rate(rate, "rate")
    key_count, key_per = _rate(key_rate, "key_rate")
    return Queue(
        name=check_queue(name),
        concurrency=check_limit(concurrency, "concurrency"),
        key_concurrency=check_limit(key_concurrency, "key_concurrency"),
        rate=count,
        per=per,
        key_rate=key_count,
        key_per=key_per,
    )


def check_limit(value: object, field: str) -> int | None:
    """*value*, checked to be None or a positive int: how many runs may run at once."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{field}= must be a positive int (runs at once), not {value!r}.")
    if not 1 <= value <= LIMIT_MAX:
        raise ValueError(
            f"{field}= must be from 1 to {LIMIT_MAX}, not {value}: a limit of 0 would never "
            f"run anything. Pause the queue's runs instead, or leave {field} out for no limit."
        )
    return value


def _rate(rate: object, field: str) -> tuple[int | None, float | None]:
    if rate is None:
        return None, None
    if not isinstance(rate, tuple | list) or len(rate) != 2:
        raise TypeError(
            f"{field}= must be (starts, period), like (100, timedelta(seconds=1)), not {rate!r}."
        )
    count, period = rate
    if not isinstance(count, int) or isinstance(count, bool):
        raise TypeError(f"{field}='s starts must be an int, not {count!r}.")
    if not 1 <= count <= RATE_MAX:
        raise ValueError(
            f"{field}='s starts must be from 1 to {RATE_MAX}, not {count}: a rate of 0 per "
            "period would never start a run."
        )
    per = seconds(period, f"{field}='s period")
    if per is None or per <= 0:
        raise ValueError(
            f"{field}='s period must be a positive duration, like timedelta(seconds=1), "
            f"not {period!r}."
        )
    return count, per


# -- the rate's log -------------------------------------------------------------------


def pack(times: Sequence[float]) -> bytes:
    """A rate log as stored: the start times, 8-byte doubles."""
    return struct.pack(f"<{len(times)}d", *times)


def unpack(blob: bytes | None) -> list[float]:
    if not blob:
        return []
    return list(struct.unpack(f"<{len(blob) // 8}d", blob))


def allowed(queue: Queue, log: Sequence[float], now: float) -> int:
    """How many runs of *queue* may start at *now*, by its rate (a large number if it
    declares none)."""
    if queue.rate is None or queue.per is None:
        return LIMIT_MAX
    recent = sum(1 for at in log if at > now - queue.per)
    return max(0, queue.rate - recent)


def record(queue: Queue, log: Sequence[float], now: float, started: int) -> list[float]:
    """*log* with *started* starts at *now*, keeping only what a later check can need:
    the last `rate` starts inside the window."""
    if queue.rate is None or queue.per is None:
        return []
    kept = [at for at in log if at > now - queue.per] + [now] * started
    return kept[-queue.rate :]


def next_start(queue: Queue, log: Sequence[float], now: float) -> float | None:
    """Seconds until *queue*'s rate lets one more run start (0: now), or None if it
    declares no rate."""
    if queue.rate is None or queue.per is None:
        return None
    recent = sorted(at for at in log if at > now - queue.per)
    if len(recent) < queue.rate:
        return 0.0
    return max(0.0, recent[-queue.rate] + queue.per - now)


def describe_rate(rate: int | None, per: float | None) -> str | None:
    """``"100 per 0:00:01"``, for listings (a queue's rate or its key rate)."""
    if rate is None or per is None:
        return None
    return f"{rate} per {dt.timedelta(seconds=per)}"


def key_starts(queue: Queue, runs: Sequence[Run], now: float) -> Counter[str]:
    """The first starts per key of *queue*'s *runs* inside its key rate's window (none
    if it declares no key rate): what `choose` and `admits` count against it."""
    if queue.key_rate is None or queue.key_per is None:
        return Counter()
    since = now - queue.key_per
    return Counter(
        run.key
        for run in runs
        if run.key is not None and run.started_at is not None and run.started_at > since
    )


# -- choosing what a claim takes ------------------------------------------------------


def live(run: Run, now: float) -> bool:
    """Whether *run* holds a slot: RUNNING on a lease that has not expired (a dead
    worker's slot is free once its lease is)."""
    return (
        run.status is RunStatus.RUNNING and run.lease_until is not None and run.lease_until >= now
    )


def choose(
    queue: Queue,
    ready: Sequence[Run],
    running: Sequence[Run],
    log: Sequence[float],
    *,
    now: float,
    limit: int,
    started: Counter[str] | None = None,
) -> list[Run]:
    """Which of *ready* (QUEUED runs of *queue*, in claim order) a claim of up to *limit*
    takes, given its *running* runs (those that hold a slot), its rate's *log* and its
    keys' recent first starts (*started*, `key_starts`).

    The SQL backend's ``claim_limited`` statement says the same; the memory backend
    runs this. A keyed run is eligible if the runs of its key ahead of it in the queue,
    plus those running, leave room under its key's limit, and, for a first start, if
    the key's first starts ahead of it, plus its recent ones, leave room under the key
    rate; the rates count only first starts (a run resumed after a wait is not a new
    start); then the queue's free slots cap the batch.
    """
    cap = limit
    if queue.concurrency is not None:
        cap = min(cap, queue.concurrency - len(running))
    if cap <= 0:
        return []
    by_key = Counter(run.key for run in running if run.key is not None)
    rank: Counter[str] = Counter()
    fresh_rank: Counter[str] = Counter()
    recent = started or Counter()
    eligible: list[Run] = []
    for run in ready:
        if run.key is not None:
            rank[run.key] += 1
            if run.started_at is None:
                fresh_rank[run.key] += 1
            bound = run.key_limit if run.key_limit is not None else queue.key_concurrency
            if bound is not None and rank[run.key] + by_key[run.key] > bound:
                continue
            if (
                run.started_at is None
                and queue.key_rate is not None
                and fresh_rank[run.key] + recent[run.key] > queue.key_rate
            ):
                continue
        eligible.append(run)
    fresh_cap, fresh = allowed(queue, log, now), 0
    chosen: list[Run] = []
    for run in eligible:
        if run.started_at is None:
            fresh += 1
            if fresh > fresh_cap:
                continue
        chosen.append(run)
    return chosen[:cap]


def admits(
    queue: Queue,
    run: Run,
    running: Sequence[Run],
    log: Sequence[float],
    now: float,
    *,
    started: Counter[str] | None = None,
) -> bool:
    """Whether *queue*'s limits let *run* be claimed on its own (a takeover, or a run
    joined by id), *running* being the runs that hold a slot, not *run* itself, and
    *started* its keys' recent first starts (`key_starts`)."""
    others = [other for other in running if other.id != run.id]
    if queue.concurrency is not None and len(others) >= queue.concurrency:
        return False
    bound = run.key_limit if run.key_limit is not None else queue.key_concurrency
    mates = sum(1 for other in others if run.key is not None and other.key == run.key)
    if bound is not None and mates >= bound:
        return False
    if run.started_at is not None:
        return True
    recent = (started or Counter())[run.key] if run.key is not None else 0
    if queue.key_rate is not None and recent >= queue.key_rate:
        return False
    return allowed(queue, log, now) > 0
