"""A task's result and the next task's start, recorded as one pair, on SQLite and
PostgreSQL: a pair whose columns that are nearly always NULL are NULL goes through a
statement that writes them as NULL instead of binding them (`record_pair_lean`); any
one of them set takes the full statement, and every value is stored as given."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from durable.backends import Backend
from durable.backends._statements.history import PAIR_NULLS
from durable.core.records import StepStatus
from durable.testing._conformance import _new, _step

VALUES: dict[str, Any] = {
    "output": b"j7",
    "error": b"jboom",
    "finished_at": 3.5,
    "wake_at": 9.25,
    "heartbeat_at": 4.5,
    "details": b'j{"done":1}',
    "state": b'j{"n":2}',
}

CASES = [None] + [(row, name) for row, names in enumerate(PAIR_NULLS) for name in sorted(names)]


@pytest.mark.parametrize(
    "make_backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_every_value_of_a_pair_is_stored_as_given(make_backend: Callable[[], Backend]) -> None:
    backend = make_backend()
    sql: Any = backend._sql  # type: ignore[attr-defined]
    written: list[str] = []
    write = backend._steps.write  # type: ignore[attr-defined]

    def spy(statement: str, *args: Any, **kwargs: Any) -> Any:
        written.append(statement)
        return write(statement, *args, **kwargs)

    backend._steps.write = spy  # type: ignore[attr-defined]
    try:
        for i, case in enumerate(CASES):
            run_id = f"run-{i}"
            backend.create_run(_new(run_id))
            result = _step(run_id, 0, input=b"j[0]")
            start = _step(
                run_id, 1, status=StepStatus.RUNNING, input=b"j[1]", output=None, finished_at=None
            )
            if case is not None:
                row, name = case
                if row == 0:
                    result = _with(result, name)
                else:
                    start = _with(start, name)
            written.clear()
            stored, _ = backend.record_steps([result, start], 1)
            assert stored == [result, start], case
            assert list(backend.load_history(run_id)) == [result, start], case
            lean = sql.record_pair_lean.sql if case is None else sql.record_pair.sql
            assert written == [lean], f"{case}: the {'lean' if case is None else 'full'} pair"
    finally:
        backend.close()


def _with(step: Any, name: str) -> Any:
    import dataclasses

    return dataclasses.replace(step, **{name: VALUES[name]})
