"""What the version filter costs a claim: ``python benchmarks/claims.py [--quick]``.

One JSON line per backend (SQLite, PostgreSQL) on stdout; progress on stderr. Each
scenario gets a fresh database with N never-started runs queued (2,000; 200 with
--quick) behind K runs that a v1 worker started and handed back (QUEUED, version v1:
what a v2 worker with ``--only-version`` must read past), then times M claims of one
run each (300; 30 with --quick) through `RunStore.claim_next`, as a worker makes them,
for R rounds (5; 1 with --quick), the scenarios interleaved:

* ``plain``: no version (K = 0), the claim as before versions;
* ``stamping``: ``version="v2"`` (K = 0): each run is stamped as it first starts;
* ``only_0``, ``only_100``, ``only_1000``: ``version="v2", only_version=True`` with
  K = 0, 100, 1,000 other-version runs at the head of the queue.

Reported per scenario: the medians over the rounds of one claim's p10, median and p95,
in microseconds (on a shared machine the p10 is the steadiest: noise only adds), each
``only_*`` over ``plain``, and for
PostgreSQL whether the claim's plan walks the claim index (``durable_runs_claim``)
under a LIMIT, with and without the filter. The filter is a row filter on that walk:
its cost grows with the other-version runs queued ahead, not with the queue.
"""

from __future__ import annotations

import sys

# The benchmarks directory holds queue.py, which would shadow the standard library.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from durable.backends import Backend, open_backend
from durable.core.records import NewRun

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
OWNER = "bench-host:1:1:aaaa"
WORKFLOW = "bench.flow"
#: (name, version, only_version, K other-version runs ahead)
SCENARIOS: list[tuple[str, str | None, bool, int]] = [
    ("plain", None, False, 0),
    ("stamping", "v2", False, 0),
    ("only_0", "v2", True, 0),
    ("only_100", "v2", True, 100),
    ("only_1000", "v2", True, 1000),
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def new(run_id: str) -> NewRun:
    return NewRun(
        id=run_id, workflow=WORKFLOW, input=b"j[]", call_hash="v1:00", owner=None, lease=30
    )


def claim(backend: Backend, limit: int, version: str | None, only: bool) -> list[Any]:
    return list(
        backend.claim_next(
            owner=OWNER,
            queue="default",
            workflows=[WORKFLOW],
            limit=limit,
            lease=30,
            version=version,
            only_version=only,
        )
    )


def fill(backend: Backend, queued: int, ahead: int) -> None:
    """*ahead* runs started by v1 and handed back, then *queued* never-started runs."""
    if ahead:
        backend.create_runs([new(f"old-{i:05d}") for i in range(ahead)])
        for run in claim(backend, ahead, "v1", False):
            backend.release_run(run.id, run.epoch)
    for start in range(0, queued, 500):
        backend.create_runs([new(f"new-{i:05d}") for i in range(start, min(queued, start + 500))])


def plan(backend: Any, only: str | None) -> str:
    """PostgreSQL's plan of the claim, one line per node."""
    statement = backend._sql.claim_next
    values = {
        "owner": OWNER, "lease": 30, "queue": "default", "workflows": [WORKFLOW], "limit": 1,
        "version": "v2", "only": only,
    }  # fmt: skip
    return backend._db.run(  # type: ignore[no-any-return]
        "Explaining",
        lambda session, _: "\n".join(
            str(row[0])
            for row in session.execute("EXPLAIN " + statement.sql, statement.params(values))
        ),
    )


def walks_the_claim_index(text: str) -> bool:
    lines = text.splitlines()
    limit = next((i for i, line in enumerate(lines) if "Limit" in line), None)
    index = next((i for i, line in enumerate(lines) if "durable_runs_claim" in line), None)
    return limit is not None and index is not None and limit < index and "Sort" not in text


def scenario(
    url: str, *, version: str | None, only: bool, ahead: int, n: int, m: int
) -> dict[str, Any]:
    backend = open_backend(url)
    try:
        fill(backend, n, ahead)
        if getattr(backend, "dialect_name", "") == "postgresql":
            backend._db.run("Analyzing", lambda s, _: s.execute("ANALYZE durable_runs"))  # type: ignore[attr-defined]
        times = []
        for _ in range(m):
            started = time.perf_counter()
            (claimed,) = claim(backend, 1, version, only)
            times.append((time.perf_counter() - started) * 1e6)
            assert claimed.id.startswith("new-" if only else ("old-", "new-")), claimed.id
        times.sort()
        result: dict[str, Any] = {
            "p10_us": times[int(0.10 * (len(times) - 1))],
            "median_us": statistics.median(times),
            "p95_us": times[int(0.95 * (len(times) - 1))],
        }
        if getattr(backend, "dialect_name", "") == "postgresql":
            shown = plan(backend, "v2" if only else None)
            result["plan_walks_claim_index"] = walks_the_claim_index(shown)
        return result
    finally:
        backend.close()


def url_for(kind: str, tmpdir: Path) -> tuple[str, Any]:
    if kind == "sqlite":
        return f"sqlite:///{tmpdir / f'claims-{uuid.uuid4().hex[:8]}.db'}", None
    import psycopg

    base = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}options=-csearch_path%3D{schema}", (base, schema)


def drop(made: Any) -> None:
    if made is None:
        return
    import psycopg

    base, schema = made
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--tmpdir", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=None, help="default: 5 (1 with --quick)")
    args = parser.parse_args()
    n, m, rounds = (200, 30, 1) if args.quick else (2000, 300, 5)
    rounds = args.rounds or rounds
    tmpdir = args.tmpdir or Path(tempfile.mkdtemp(prefix="durable-claims-"))
    chosen = [s for s in SCENARIOS if not (args.quick and s[3] > 100)]
    for kind in args.backends.split(","):
        found: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in chosen}
        for round_ in range(rounds):  # interleaved, so drift touches every scenario alike
            for name, version, only, ahead in chosen:
                url, made = url_for(kind, tmpdir)
                try:
                    log(f"{kind}: {name} (round {round_ + 1} of {rounds})")
                    found[name].append(
                        scenario(url, version=version, only=only, ahead=ahead, n=n, m=m)
                    )
                finally:
                    drop(made)
        report: dict[str, Any] = {
            "backend": "postgresql" if kind == "postgres" else kind,
            "queued": n,
            "claims": m,
            "rounds": rounds,
        }
        for name, results in found.items():
            report[name] = {
                key: round(statistics.median(r[key] for r in results), 1)
                for key in ("p10_us", "median_us", "p95_us")
            }
            if "plan_walks_claim_index" in results[0]:
                report[name]["plan_walks_claim_index"] = all(
                    r["plan_walks_claim_index"] for r in results
                )
        for name in found:
            if name.startswith("only_"):
                report[f"{name}_over_plain"] = {
                    key: round(report[name][key] / report["plain"][key], 2)
                    for key in ("p10_us", "median_us")
                }
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
