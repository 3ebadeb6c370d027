"""What checking a typed event costs a send: ``python benchmarks/typed_events.py [--quick]``.

One JSON line per backend (SQLite, PostgreSQL) on stdout; progress on stderr. N runs
(300; 20 with --quick) of each workflow wait for their event, then one event is sent to
each, in this process, and the mean time per send is printed (microseconds):

* raw_send_us: what `send` did before typed events, `Engine.dump` and
  `WaitStore.send_event`, to runs of an untyped wait;
* untyped_send_us: `durable.send` to such runs (now it reads the run first, to find
  the schema of the event if any);
* declared_send_us: to runs whose workflow declares the event (Pydantic validates into
  the model, its JSON form is stored);
* stored_schema_send_us: to runs that typed the wait only, so the sender has no
  declaration: the wait's JSON Schema is read from the run's history and checked
  with jsonschema (the REST API's and `durable.Client`'s path without the code).
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import datetime as dt
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

import durable
from durable import wait, workflow
from durable.runtime.defaults import swap

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
PAYLOAD = {"approved": True, "amount": 12.5, "reason": "late delivery", "items": [1, 2, 3]}


class Approval(BaseModel):
    approved: bool
    amount: float = Field(ge=0)
    reason: str
    items: list[int] = []


@workflow(name="bench.untyped")
def untyped() -> Any:
    return wait("approval", timeout=dt.timedelta(days=1))


@workflow(name="bench.declared", events={"approval": Approval})
def declared() -> bool:
    return bool(wait("approval", timeout=dt.timedelta(days=1)).approved)


@workflow(name="bench.stored")
def stored() -> bool:
    return wait("approval", timeout=dt.timedelta(days=1), schema=Approval).approved


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def waiting_runs(engine: durable.Engine, target: Any, n: int) -> list[str]:
    """*n* runs of *target*, each waiting for its event."""
    ids = [f"{target.name}-{uuid.uuid4().hex[:8]}-{i}" for i in range(n)]
    for run_id in ids:
        durable.dispatch(target, id=run_id)
    worker = durable.Worker(engine, poll=0.01, concurrency=8).start()
    try:
        deadline = time.monotonic() + 120
        while any(engine.reread(r).status is not durable.RunStatus.WAITING for r in ids):
            if time.monotonic() > deadline:
                raise SystemExit(f"{target.name}: runs did not reach their wait")
            time.sleep(0.05)
    finally:
        worker.stop(grace=5)
    return ids


def per_send(ids: list[str], send: Callable[[str], None]) -> float:
    started = time.perf_counter()
    for run_id in ids:
        send(run_id)
    return (time.perf_counter() - started) / len(ids) * 1e6


def measure(backend: str, url: str, n: int) -> dict[str, Any]:
    engine = durable.Engine(url, lease=30.0)
    previous = swap(engine)
    try:
        runs = {
            name: waiting_runs(engine, target, n)
            for name, target in (
                ("raw", untyped),
                ("untyped", untyped),
                ("declared", declared),
                ("stored", stored),
            )
        }

        def raw(run_id: str) -> None:
            engine.backend.send_event(run_id, "approval", engine.dump(PAYLOAD, "bench"))

        def typed(run_id: str) -> None:
            durable.send(run_id, "approval", PAYLOAD)

        result = {
            "backend": backend,
            "runs_each": n,
            "raw_send_us": per_send(runs["raw"], raw),
            "untyped_send_us": per_send(runs["untyped"], typed),
            "declared_send_us": per_send(runs["declared"], typed),
            "stored_schema_send_us": per_send(runs["stored"], typed),
        }
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in result.items()}
    finally:
        swap(previous)
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 runs each, for a smoke test")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--tmpdir", default=None)
    args = parser.parse_args()
    n = 20 if args.quick else 300
    tmpdir = args.tmpdir or tempfile.mkdtemp(prefix="durable-typed-")
    for backend in args.backends.split(","):
        if backend == "sqlite":
            url = f"sqlite:///{os.path.join(tmpdir, f'typed-{uuid.uuid4().hex[:6]}.db')}"
            name = "sqlite"
        elif backend == "postgres":
            base = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
            schema = f"bench_typed_{uuid.uuid4().hex[:10]}"
            _sql(base, f'CREATE SCHEMA "{schema}"')
            separator = "&" if "?" in base else "?"
            url, name = f"{base}{separator}options=-csearch_path%3D{schema}", "postgresql"
        else:
            raise SystemExit(f"unknown backend {backend!r}: sqlite or postgres")
        log(f"{name}: {n} runs of each workflow")
        try:
            print(json.dumps(measure(name, url, n)), flush=True)
        finally:
            if backend == "postgres":
                _sql(base, f'DROP SCHEMA "{schema}" CASCADE')


def _sql(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(statement)


if __name__ == "__main__":
    main()
