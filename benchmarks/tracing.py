"""What OpenTelemetry spans cost per step: ``python benchmarks/tracing.py [--quick]``.

One JSON line per backend on stdout, progress on stderr (``--help`` lists the options).
The workload of benchmarks/steps.py's measurement 1 (after 50 warm-up workflows, 200
workflows of 10 no-op task steps, one after another: wall time / 2000), executed in a
child process per mode, on a fresh SQLite file or PostgreSQL schema each:

- ``off``: ``tracing=False``: no observer at all;
- ``api``: tracing on (the default where opentelemetry-api is installed) but no tracer
  provider set: the API's non-recording spans, and no trace context to store;
- ``sdk``: an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` whose exporter drops
  the spans: each execution and attempt makes a recording span, ended and queued.

The modes are interleaved (off, api, sdk, off, api, sdk...), so that a change in the
machine's load falls on all of them; each one's median over the repetitions, and
``us_per_step_sdk_over_off`` (what a recording span per step adds) are reported.
"""

from __future__ import annotations

import sys

# benchmarks/queue.py shares its name with the standard library's queue module, and
# Python puts a script's directory first on sys.path: take it off before importing.
sys.path[:] = [p for p in sys.path if p != __file__.rsplit("/", 1)[0]]

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import durable
from durable import execute, task, workflow

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
MODES = ("off", "api", "sdk")


@task(name="bench.trace_step")
def step(i: int) -> int:
    return i


@workflow(name="bench.trace_steps")
def steps(n: int) -> int:
    for i in range(n):
        step(i)
    return n


def log(message: str) -> None:
    print(f"[tracing.py] {message}", file=sys.stderr, flush=True)


def child(mode: str, url: str, warmup: int, workflows: int) -> None:
    """In the child process: set up *mode*, run the workload, print us per step."""
    if mode == "sdk":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        class Dropped(SpanExporter):
            def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropped()))
        trace.set_tracer_provider(provider)
    with contextlib.closing(durable.configure(url, tracing=mode != "off")):
        for _ in range(warmup):
            execute(steps, 10)
        start = time.perf_counter()
        for _ in range(workflows):
            execute(steps, 10)
        elapsed = time.perf_counter() - start
    print(json.dumps({"us_per_step": elapsed / (workflows * 10) * 1e6}), flush=True)


class Bench:
    """The modes of one backend, interleaved, each on a fresh database."""

    def __init__(self, backend: str, quick: bool, tmp: Path, pg_url: str) -> None:
        self.backend, self.quick, self.tmp, self.pg_url = backend, quick, tmp, pg_url
        self.reps, self.warmup, self.workflows = (1, 2, 5) if quick else (5, 50, 200)
        self._count = 0

    @contextlib.contextmanager
    def fresh(self) -> Iterator[str]:
        """Yield the URL of an empty SQLite file, PostgreSQL schema or memory backend."""
        self._count += 1
        name = f"trace_bench_{os.getpid()}_{self._count}"
        if self.backend == "memory":
            yield "memory://"
        elif self.backend == "sqlite":
            try:
                yield f"sqlite:///{self.tmp / name}.db"
            finally:
                for suffix in (".db", ".db-wal", ".db-shm"):
                    (self.tmp / f"{name}{suffix}").unlink(missing_ok=True)
        else:
            import psycopg

            with psycopg.connect(self.pg_url, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{name}"')
            try:
                separator = "&" if "?" in self.pg_url else "?"
                yield f"{self.pg_url}{separator}options=-csearch_path%3D{name}"
            finally:
                with psycopg.connect(self.pg_url, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "{name}" CASCADE')

    def measure(self, mode: str) -> float:
        with self.fresh() as url:
            argv = [sys.executable, __file__, "--child", mode, url, str(self.warmup)]
            done = subprocess.run(
                [*argv, str(self.workflows)], capture_output=True, text=True, check=False
            )
        if done.returncode != 0:
            raise RuntimeError(f"the {mode} child failed:\n{done.stderr}")
        return float(json.loads(done.stdout)["us_per_step"])

    def run(self) -> dict[str, Any]:
        log(f"{self.backend}:")
        values: dict[str, list[float]] = {mode: [] for mode in MODES}
        for rep in range(self.reps):
            for mode in MODES:
                values[mode].append(self.measure(mode))
            now = ", ".join(f"{mode} {values[mode][-1]:.1f}" for mode in MODES)
            log(f"  rep {rep + 1}: us/step {now}")
        medians = {mode: statistics.median(values[mode]) for mode in MODES}
        return {
            "backend": self.backend,
            "python": sys.version.split()[0],
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "quick": self.quick,
            "repetitions": self.reps,
            "workflows": self.workflows,
            "load_average_1min": round(os.getloadavg()[0], 2),
            **{f"us_per_step_{mode}": round(medians[mode], 2) for mode in MODES},
            **{f"us_per_step_{mode}_values": [round(v, 2) for v in values[mode]] for mode in MODES},
            "us_per_step_api_over_off": round(medians["api"] - medians["off"], 2),
            "us_per_step_sdk_over_off": round(medians["sdk"] - medians["off"], 2),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="memory,sqlite,postgres", help="%(default)s")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a CI smoke test")
    default_pg = os.environ.get("DURABLE_BENCH_POSTGRES_URL", DEFAULT_PG)
    parser.add_argument("--postgres-url", default=default_pg, help="%(default)s")
    parser.add_argument("--tmpdir", help="where SQLite files go: a real disk, not tmpfs")
    args = parser.parse_args()
    backends = [{"postgres": "postgresql"}.get(b, b) for b in args.backends.split(",")]
    if unknown := set(backends) - {"memory", "sqlite", "postgresql"}:
        parser.error(f"unknown backends: {sorted(unknown)}")
    with tempfile.TemporaryDirectory(prefix="durable-bench-", dir=args.tmpdir) as tmp:
        for backend in backends:
            result = Bench(backend, args.quick, Path(tmp), args.postgres_url).run()
            print(json.dumps(result), flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
elif __name__ == "__main__":
    main()
