"""What `durable.patched()` costs per call: ``python benchmarks/patches.py [--quick]``.

One JSON line per backend (memory, SQLite, PostgreSQL) on stdout; progress on stderr.
A workflow calls ``patched(f"p{i}")`` K times (10,000; 200 with --quick), each id once,
or ``patched("same")`` K times (remembered after the first).

Times are of the workflow's loop only (run creation and history loading excluded):

* us_per_call_live: a new run on new code: each call records a marker, which rides
  with the run's next write (here the next marker's: one write each).
* us_per_call_replay_marked: a run that recorded the markers, replayed.
* us_per_call_replay_old: a run whose history went past each point on the old code (K
  ``now()`` steps, no markers) replayed on code with a ``patched`` before each (the
  old branch), less the replay of the same history on the old code.
* us_per_call_remembered: the same id again in a loop (its first call records).
* lookups_per_call_*: calls into the replay cursor's history (``Replay.recorded`` and
  ``Replay.decide``) per ``patched`` call, counted. The old branch makes one; the
  marked branch two, one of which is the position check every durable call makes; a
  remembered id none.

The issue's target: at most one history lookup per call on the hot path.
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library:
# move it from the front of sys.path (where Python puts a script's) to the end.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]
sys.path.append(__file__.rsplit("/", 1)[0])

import argparse
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from _pg_schemas import drop_schema, fresh_schema

import durable
from durable import execute, workflow
from durable.core.replay import Replay

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
#: The deploy the workflow code is on, and whether its first execution stops.
CODE = {"patch": True, "stop": False}
#: How long the workflow's loop took in its last execution.
ELAPSED = {"loop": 0.0}


class Stop(BaseException):
    """Raised after the loop on a first execution: the run is left unfinished, as if
    its process died, so the next execute replays it."""


@workflow
def loop(k: int, mode: str) -> int:
    started = time.perf_counter()
    for i in range(k):
        if CODE["patch"]:
            durable.patched("same" if mode == "same" else f"p{i}")
        if mode == "now":
            durable.now()
    ELAPSED["loop"] = time.perf_counter() - started
    if CODE["stop"]:
        raise Stop
    return k


class Lookups:
    """Counts calls into the replay cursor's history while installed."""

    def __init__(self) -> None:
        self.count = 0
        self._saved = (Replay.recorded, Replay.decide)

    def __enter__(self) -> Lookups:
        recorded, decide = self._saved

        def counted_recorded(replay: Replay, position: int) -> Any:
            self.count += 1
            return recorded(replay, position)

        def counted_decide(replay: Replay, *args: Any) -> Any:
            self.count += 1
            return decide(replay, *args)

        Replay.recorded = counted_recorded  # type: ignore[method-assign]
        Replay.decide = counted_decide  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        Replay.recorded, Replay.decide = self._saved  # type: ignore[method-assign]


def once(k: int, mode: str, run_id: str, *, patch: bool, stop: bool) -> float:
    """Execute (or resume) run *run_id* on the given code; the loop's time."""
    CODE.update(patch=patch, stop=stop)
    with contextlib.suppress(Stop):
        execute(loop, k, mode, id=run_id)
    return ELAPSED["loop"]


def replayed(k: int, mode: str, run_id: str, *, first: bool, then: bool) -> tuple[float, int]:
    """A run recorded on code *first* (patched or not), replayed on code *then*: the
    replay's loop time, and its history lookups (counted in a twin run)."""
    once(k, mode, run_id, patch=first, stop=True)
    seconds = once(k, mode, run_id, patch=then, stop=False)
    once(k, mode, f"{run_id}-counted", patch=first, stop=True)
    with Lookups() as counted:
        once(k, mode, f"{run_id}-counted", patch=then, stop=False)
    return seconds, counted.count


def measure(url: str, k: int) -> dict[str, Any]:
    durable.configure(url)
    us = 1e6 / k
    live = once(k, "ids", "live", patch=True, stop=False)
    marked, marked_lookups = replayed(k, "ids", "marked", first=True, then=True)
    old, old_lookups = replayed(k, "now", "old", first=False, then=True)
    plain, plain_lookups = replayed(k, "now", "plain", first=False, then=False)
    with Lookups() as counted:
        same = once(k, "same", "same", patch=True, stop=False)
    return {
        "k": k,
        "us_per_call_live": round(live * us, 2),
        "us_per_call_replay_marked": round(marked * us, 3),
        "us_per_call_replay_old": round((old - plain) * us, 3),
        "us_per_call_remembered": round(same * us, 3),
        "lookups_per_call_marked": round(marked_lookups / k, 3),
        "lookups_per_call_old": round((old_lookups - plain_lookups) / k, 3),
        "lookups_per_call_remembered": round(counted.count / k, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--quick", action="store_true", help="200 calls: a smoke test")
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    args = parser.parse_args()
    k = 200 if args.quick else 10_000
    for backend in args.backends.split(","):
        if backend == "memory":
            url, name = "memory://", "memory"
        elif backend == "sqlite":
            folder = tempfile.mkdtemp(dir=args.tmpdir)
            url, name = f"sqlite:///{Path(folder) / 'patches.db'}", "sqlite"
        else:
            base = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
            url, name = fresh_schema(base), "postgresql"
        print(f"{name}: {k} calls", file=sys.stderr, flush=True)
        line = {"backend": name, **measure(url, k)}
        line["meets_targets"] = {"one_lookup": line["lookups_per_call_old"] <= 1}
        print(json.dumps(line), flush=True)
        durable.get_engine().close()
        if backend == "postgres":
            drop_schema(base, url)


if __name__ == "__main__":
    main()
