"""The invariants chaos tests end with, checked against the database and the ledger.

The ledger is written by task bodies themselves (tests/e2e/workers_app.py): one line
per body execution, ``run position pid token``, appended with O_APPEND, so it counts
executions independently of the database under test. A task's result carries its
token, which ties the recorded outcome to the execution that produced it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import durable
from durable import RunStatus, StepStatus
from durable.core.tallies import DAY, HOUR


@dataclass(frozen=True)
class Entry:
    """One task body execution, as the ledger saw it."""

    run_id: str
    position: int
    pid: int
    token: str


def read_ledger(path: Path) -> list[Entry]:
    """Every ledger line, in the order the bodies wrote them."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        run_id, position, pid, token = line.split()
        entries.append(Entry(run_id, int(position), int(pid), token))
    return entries


@dataclass
class Report:
    """What the checker counted, for the test to print and assert on."""

    runs: int = 0
    steps: int = 0
    bodies: int = 0
    repeated: int = 0


def check(
    url: str,
    ledger: Path,
    expected: Mapping[str, Any],
    *,
    killed: Collection[int] = (),
    only_killed_repeat: bool = True,
) -> Report:
    """Assert the invariants; return the counts.

    * every expected run COMPLETED with exactly the expected result;
    * its history has positions 0..n-1, each recorded once, each finished;
    * for every recorded task result, the execution that produced it is the last one
      the ledger saw at that position: no body ran after its result was committed;
    * with *only_killed_repeat*, every other execution at a position ran in a process
      that was killed (a body re-runs only if its process died first);
    * every ended task call is tallied once (`check_tallies`).
    """
    report = Report()
    entries = read_ledger(ledger)
    by_position: dict[tuple[str, int], list[Entry]] = defaultdict(list)
    for entry in entries:
        by_position[(entry.run_id, entry.position)].append(entry)
    report.bodies = len(entries)
    with durable.Engine(url) as engine:
        for run_id, result in expected.items():
            run = engine.backend.get_run(run_id)
            assert run is not None, f"run {run_id} is missing"
            assert run.status is RunStatus.COMPLETED, f"run {run_id} is {run.status}"
            assert engine.outcome(run) == result, f"run {run_id} returned the wrong result"
            report.runs += 1
            history = list(engine.backend.load_history(run_id))
            assert [step.position for step in history] == list(range(len(history))), run_id
            for step in history:
                assert step.status is StepStatus.COMPLETED, (run_id, step.position, step.status)
                assert step.epoch <= run.epoch, "a step from a future owner?"
                report.steps += 1
                value = engine.load(step.output or b"", run_id, step.position)
                if not (isinstance(value, dict) and "token" in value):
                    continue  # not a ledger-writing task (a child workflow, a dispatch)
                executions = by_position[(run_id, step.position)]
                tokens = [e.token for e in executions]
                assert value["token"] in tokens, f"{run_id}@{step.position}: result from nowhere"
                assert tokens[-1] == value["token"], (
                    f"{run_id}@{step.position}: a body ran after its result was committed"
                )
                report.repeated += len(executions) - 1
                if only_killed_repeat:
                    for execution in executions[:-1]:
                        assert execution.pid in killed, (
                            f"{run_id}@{step.position} ran again though process "
                            f"{execution.pid} was not killed"
                        )
        check_tallies(url, engine)
    return report


def check_tallies(url: str, engine: durable.Engine) -> None:
    """Every ended task call in the database is tallied once, with its status: the
    calls of executions a kill cut short too (counted when a later execution ended).
    Call it once no run is running."""
    if not url.startswith(("sqlite", "postgresql")):
        return
    driver = url.replace("postgresql://", "postgresql+psycopg://", 1)
    sql = sa.create_engine(driver)
    try:
        with sql.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT name, status, count(*) FROM durable_history WHERE kind = 'task' "
                    "AND status IN ('completed', 'failed') AND started_at IS NOT NULL "
                    "GROUP BY name, status"
                )
            ).fetchall()
            uncounted = conn.execute(
                sa.text(
                    "SELECT h.run_id, h.position, h.status, r.status FROM durable_history AS h "
                    "JOIN durable_runs AS r ON r.id = h.run_id WHERE h.kind = 'task' "
                    "AND h.status IN ('completed', 'failed') AND h.tallied IS NULL"
                )
            ).fetchall()
    finally:
        sql.dispose()
    calls = {(name, status): count for name, status, count in rows}
    for grain in (HOUR, DAY):
        found = engine.backend.tallies(grain, 0.0, kind="task", by_bucket=False, by_bin=False)
        tallied: dict[tuple[str, str], int] = defaultdict(int)
        for t in found:  # one per workflow calling the task
            if t.status != "retried":
                tallied[t.name, t.status] += t.count
        assert tallied == calls, (grain, dict(tallied), calls, uncounted)
