"""The reference test_tallies.py holds the tallies to: random runs, task calls and
operator retries (hypothesis strategies), written row by row as the engine writes them
(created, claimed, its steps, then moved to its final status) on memory, SQLite and
PostgreSQL, and the statistics computed here from scratch from what was written."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import sqlalchemy as sa
from hypothesis import strategies as st

from durable.backends import Backend, MemoryBackend
from durable.core.records import NewRun, RunStatus, Step, StepKind, StepStatus
from durable.core.tallies import DAY, HOUR, bin_of, bound, bucket

TERMINAL = ("completed", "failed", "cancelled", "dead", "timed_out", "continued")
FAILURES = ("failed", "dead", "timed_out")


@dataclass
class Call:
    name: str
    status: str  # completed, failed, running
    offset: float  # seconds after the run's start
    seconds: float


@dataclass
class Spec:
    workflow: str
    status: str
    age: float  # seconds before now the run was created
    wait: float  # seconds from creation to its first start
    seconds: float  # from its start to its end
    calls: list[Call] = field(default_factory=list)
    retried: bool = False


durations = st.one_of(
    st.floats(0, 0.002), st.floats(0, 5), st.floats(0, 4000), st.sampled_from([0.0, 0.001])
)
calls = st.builds(
    Call,
    name=st.sampled_from(["t.load", "t.charge"]),
    status=st.sampled_from(["completed", "failed", "running"]),
    offset=st.floats(0, 30),
    seconds=durations,
)
specs = st.builds(
    Spec,
    workflow=st.sampled_from(["w.checkout", "w.refund", "w.sync"]),
    status=st.sampled_from(["queued", "running", "waiting", *TERMINAL]),
    age=st.one_of(st.floats(60, 9 * DAY), st.floats(60, 2 * 3600)),
    wait=st.one_of(st.just(0.0), st.floats(0, 100)),
    seconds=durations,
    calls=st.lists(calls, max_size=3),
    retried=st.booleans(),
)


class Writer:
    """Writes runs and steps as the engine would: created, then moved to their end."""

    def __init__(self, backend: Backend, url: str | None) -> None:
        self.backend = backend
        self.sql = None if url is None else sa.create_engine(url)
        self._finish: tuple[str, str, float | None] = ("", "queued", None)

    def run(self, run_id: str, spec: Spec, now: float) -> None:
        created = now - spec.age
        started = created + spec.wait if spec.status != "queued" else None
        ended = spec.status in TERMINAL
        finished = started + spec.seconds if ended and started is not None else None
        if self.sql is None:
            self.backend.create_run(
                NewRun(
                    id=run_id,
                    workflow=spec.workflow,
                    input=b"j[]",
                    call_hash="h",
                    owner=None,
                    lease=None,
                )
            )
            memory = self.backend
            assert isinstance(memory, MemoryBackend)
            memory._runs[run_id] = dataclasses.replace(
                memory._runs[run_id],
                status=RunStatus(spec.status),
                created_at=created,
                started_at=started,
                finished_at=finished,
                epoch=1,
            )
            return
        with self.sql.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO durable_runs (id, workflow, status, input, call_hash, epoch, "
                    "recoveries, created_at, updated_at) VALUES "
                    "(:id, :w, 'queued', :i, 'h', 0, 0, :c, :c)"
                ),
                {"id": run_id, "w": spec.workflow, "i": b"j[]", "c": created},
            )
        # Claimed: its execution's steps come next (a queued run with steps was handed
        # back after them).
        if spec.status != "queued" or spec.calls:
            with self.sql.begin() as conn:
                conn.execute(
                    sa.text(
                        "UPDATE durable_runs SET status = 'running', started_at = :b, "
                        "epoch = 1 WHERE id = :id"
                    ),
                    {"b": started, "id": run_id},
                )
        self._finish = (run_id, spec.status, finished)

    def end(self) -> None:
        """The last run's execution ends: it moves to its status (SQL: the engine's
        order, after its steps; the memory backend has it already)."""
        if self.sql is None or self._finish[1] == "running":
            return
        run_id, status, finished = self._finish
        with self.sql.begin() as conn:
            conn.execute(
                sa.text("UPDATE durable_runs SET status = :s, finished_at = :f WHERE id = :id"),
                {"s": status, "f": finished, "id": run_id},
            )

    def step(self, run_id: str, position: int, call: Call, started: float) -> None:
        finished = None if call.status == "running" else started + call.seconds
        if self.sql is None:
            memory = self.backend
            assert isinstance(memory, MemoryBackend)
            memory._history.setdefault(run_id, {})[position] = Step(
                run_id=run_id,
                position=position,
                kind=StepKind.TASK,
                name=call.name,
                call_hash="h",
                status=StepStatus(call.status),
                started_at=started,
                finished_at=finished,
                epoch=1,
            )
            return
        with self.sql.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO durable_history (run_id, position, kind, name, call_hash, "
                    "status, attempts, started_at, epoch) VALUES "
                    "(:r, :p, 'task', :n, 'h', 'running', 1, :b, 1)"
                ),
                {"r": run_id, "p": position, "n": call.name, "b": started},
            )
        if finished is not None:
            with self.sql.begin() as conn:
                conn.execute(
                    sa.text(
                        "UPDATE durable_history SET status = :s, finished_at = :f "
                        "WHERE run_id = :r AND position = :p"
                    ),
                    {"s": call.status, "f": finished, "r": run_id, "p": position},
                )

    def close(self) -> None:
        if self.sql is not None:
            self.sql.dispose()


@dataclass
class Outcome:
    """One thing the reference counts."""

    kind: str
    name: str
    status: str  # a run's class (open, or terminal), a call's status, or retried
    at: float  # creation (run) or start (call)
    seconds: float | None
    finished: float | None


def write(writer: Writer, runs: list[Spec], now: float) -> list[Outcome]:
    """Write *runs*, retry the failed ones marked so, and return what should count."""
    counted: list[Outcome] = []
    for index, spec in enumerate(runs):
        run_id = f"r-{index:03d}"
        writer.run(run_id, spec, now)
        created = now - spec.age
        started = created + spec.wait
        ended = spec.status in TERMINAL and spec.status != "queued"
        erased: set[int] = set()
        for position, call in enumerate(spec.calls):
            begin = started + call.offset
            writer.step(run_id, position, call, begin)
            if call.status == "failed":
                erased.add(position)
        writer.end()
        retry = spec.retried and spec.status in ("failed", "dead")
        if retry:
            assert writer.backend.retry_run(run_id, sorted(erased)) is not None
        run_status = "open" if retry or not ended else spec.status
        # A duration as the database has it: the difference of the stored times, which
        # may be a fraction of a microsecond off the spec's (epoch seconds as doubles),
        # enough to move a duration just above a bin's bound into the bin below.
        finished = started + spec.seconds
        seconds = finished - started
        counted.append(
            Outcome(
                "run",
                spec.workflow,
                run_status,
                created,
                seconds if run_status != "open" else None,
                finished if run_status != "open" else None,
            )
        )
        if retry:
            counted.append(Outcome("run", spec.workflow, "retried", created, seconds, finished))
        # The SQL backends count a run's calls when its execution ends (the memory
        # backend at once): those of a run still running are not counted yet.
        batched = writer.sql is not None and spec.status == "running"
        for position, call in enumerate(spec.calls):
            if call.status == "running" or batched:
                continue
            begin = started + call.offset
            status = "retried" if retry and position in erased else call.status
            end = begin + call.seconds
            counted.append(Outcome("task", call.name, status, begin, end - begin, end))
    return counted


def expected(found: list[Outcome], since: float, now: float) -> dict[tuple[str, str], dict]:
    """The Stat of each (kind, name) from *found*, computed here from scratch."""
    start, recent = bucket(since, HOUR), bucket(now - DAY, HOUR)
    figures: dict[tuple[str, str], dict] = {}
    names = sorted({(o.kind, o.name) for o in found if bucket(o.at, HOUR) >= start})
    for kind, name in names:
        mine = [
            o for o in found if (o.kind, o.name) == (kind, name) and bucket(o.at, HOUR) >= start
        ]
        failed = [o for o in mine if o.status in (*FAILURES, "retried")]
        completed = sum(o.status == "completed" for o in mine)
        timed = sorted(o.seconds for o in mine if o.seconds is not None)
        ended = completed + len(failed)
        # Percentiles are over whole days: their bins are tallied per day.
        days = sorted(
            o.seconds
            for o in found
            if (o.kind, o.name) == (kind, name)
            and o.seconds is not None
            and bucket(o.at, DAY) >= bucket(since, DAY)
        )

        def nearest(fraction: float, days: list[float] = days) -> float | None:
            if not days:
                return None
            return bound(bin_of(days[max(1, math.ceil(fraction * len(days))) - 1]))

        figures["workflow" if kind == "run" else "task", name] = {
            "runs": sum(o.status != "retried" for o in mine),
            "completed": completed,
            "failed": len(failed),
            "success": round(100.0 * completed / ended, 2) if ended else None,
            "avg_duration": sum(timed) / len(timed) if timed else None,
            "p50_duration": nearest(0.5),
            "p95_duration": nearest(0.95),
            "last_failure": max((o.finished for o in failed if o.finished), default=None),
            "failures_24h": sum(bucket(o.at, HOUR) >= recent for o in failed),
        }
    return figures
