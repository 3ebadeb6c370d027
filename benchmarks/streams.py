"""What streams cost: ``python benchmarks/streams.py [--quick]``.

One JSON line per backend (memory, SQLite, PostgreSQL) on stdout; progress on stderr.

* us_per_write_workflow: a workflow writes K values (2,000; 100 with --quick) to one
  stream in a loop: each is one short transaction (the run's row, the stream's head,
  the insert).
* us_per_write_replayed: the same run's code replayed (its first execution stopped
  after the loop, as if its process died): one read of the stream's count, then each
  write only encodes its value.
* us_per_write_task: a task body writes K values.
* ms_reader_latency_p50 / _p90: a reader in this process, started first, sees each of
  50 values (written 20 ms apart by a worker here) this long after its write began.
  Readers in other processes hear PostgreSQL's NOTIFY at once; on SQLite they poll
  every 50 ms, which bounds their latency instead.
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
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from _pg_schemas import drop_schema, fresh_schema

import durable
from durable import task, workflow

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
CODE = {"stop": False}
ELAPSED = {"loop": 0.0}


class Stop(BaseException):
    """Raised after the loop on a first execution: the run is left unfinished."""


@workflow
def writer(k: int) -> int:
    stream = durable.stream("values")
    started = time.perf_counter()
    for i in range(k):
        stream.write(i)
    ELAPSED["loop"] = time.perf_counter() - started
    if CODE["stop"]:
        raise Stop
    return k


@task
def task_writer(k: int) -> float:
    stream = durable.stream("values")
    started = time.perf_counter()
    for i in range(k):
        stream.write(i)
    return time.perf_counter() - started


@workflow
def in_a_task(k: int) -> float:
    return task_writer(k)


@workflow
def paced(count: int) -> int:
    stream = durable.stream("paced")
    for _ in range(count):
        time.sleep(0.02)  # not durable: a pause between writes, for the reader to wait
        stream.write(time.time())
    return count


def measure(url: str, k: int) -> dict[str, Any]:
    engine = durable.configure(url)
    CODE["stop"] = True
    run_id = f"writer-{uuid.uuid4().hex[:8]}"
    with contextlib.suppress(Stop):
        durable.execute(writer, k, id=run_id)
    live = ELAPSED["loop"]
    CODE["stop"] = False
    durable.execute(writer, k, id=run_id)
    replayed = ELAPSED["loop"]
    in_task = durable.execute(in_a_task, k)
    handle = durable.dispatch(paced, 50)
    delays: list[float] = []
    reader = threading.Thread(
        target=lambda: delays.extend(time.time() - t for t in handle.stream("paced"))
    )
    reader.start()
    with durable.Worker(engine, poll=0.02):
        handle.result(timeout=120)
        reader.join(120)
    cuts = statistics.quantiles(delays, n=10)
    return {
        "us_per_write_workflow": round(live / k * 1e6, 1),
        "us_per_write_replayed": round(replayed / k * 1e6, 2),
        "us_per_write_task": round(in_task / k * 1e6, 1),
        "ms_reader_latency_p50": round(statistics.median(delays) * 1e3, 2),
        "ms_reader_latency_p90": round(cuts[8] * 1e3, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--quick", action="store_true", help="100 writes: a smoke test")
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    args = parser.parse_args()
    k = 100 if args.quick else 2000
    for backend in args.backends.split(","):
        if backend == "memory":
            url, name = "memory://", "memory"
        elif backend == "sqlite":
            folder = tempfile.mkdtemp(dir=args.tmpdir)
            url, name = f"sqlite:///{Path(folder) / 'streams.db'}", "sqlite"
        else:
            base = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
            url, name = fresh_schema(base), "postgresql"
        print(f"{name}: {k} writes", file=sys.stderr, flush=True)
        print(json.dumps({"backend": name, **measure(url, k)}), flush=True)
        durable.get_engine().close()
        if backend == "postgres":
            drop_schema(base, url)


if __name__ == "__main__":
    main()
