"""Generated run ids sort by creation time; history rows become Steps field by field."""

from __future__ import annotations

import dataclasses
import time
import uuid

import pytest

from durable import execute, workflow
from durable.backends import _rows, _schema
from durable.core.ids import new_run_id
from durable.core.records import Step, StepKind, StepStatus


def test_a_generated_id_is_a_uuid7_in_32_hex_digits() -> None:
    """RFC 9562 version 7 and variant bits, and the current time in its first 48 bits."""
    before = time.time_ns() // 1_000_000
    made = new_run_id()
    after = time.time_ns() // 1_000_000
    parsed = uuid.UUID(made)
    assert len(made) == 32 and made == parsed.hex
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert before <= int(made[:12], 16) <= after


def test_generated_ids_sort_by_creation_and_never_repeat() -> None:
    """Ids made in later milliseconds sort later; 50,000 made at once are all distinct."""
    ordered = []
    for _ in range(5):
        ordered.append(new_run_id())
        time.sleep(0.002)
    assert ordered == sorted(ordered)
    assert len({new_run_id() for _ in range(50_000)}) == 50_000


@pytest.mark.usefixtures("memory_engine")
def test_runs_without_an_id_get_time_ordered_ids() -> None:
    """execute() names a run with a UUIDv7 when the caller gives no id."""
    seen: list[str] = []

    @workflow
    def whoami() -> str:
        from durable.runtime.context import current_run

        context = current_run()
        assert context is not None
        seen.append(context.run_id)
        return context.run_id

    for _ in range(3):
        execute(whoami)
        time.sleep(0.002)
    assert seen == sorted(seen)
    assert all(uuid.UUID(run_id).version == 7 for run_id in seen)


def test_steps_fields_are_in_the_history_tables_column_order() -> None:
    """`_rows.step` fills Step's slots in order from a row: the two orders must agree."""
    fields = [field.name for field in dataclasses.fields(Step)]
    assert fields == [column.name for column in _schema.history.c]


def test_a_row_becomes_the_step_the_constructor_makes() -> None:
    """Equal, equally hashed, with enum kind and status, and still frozen."""
    row = ("r-1", 7, "task", "app.charge", "t1:ab", "retrying", b"ji", None, b"je", 2)
    row += (1.5, 2.5, 3, 9.0, 4.5, b'j{"done":1}', b'j{"status":"new"}')
    made = _rows.step(row)
    expected = Step(
        run_id="r-1", position=7, kind=StepKind.TASK, name="app.charge", call_hash="t1:ab",
        status=StepStatus.RETRYING, input=b"ji", output=None, error=b"je", attempts=2,
        started_at=1.5, finished_at=2.5, epoch=3, wake_at=9.0, heartbeat_at=4.5,
        details=b'j{"done":1}', state=b'j{"status":"new"}',
    )  # fmt: skip
    assert made == expected and hash(made) == hash(expected)
    assert made.kind is StepKind.TASK and made.status is StepStatus.RETRYING
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.position = 8  # type: ignore[misc]
    with pytest.raises(ValueError, match="shorter"):
        _rows.step(row[:-1])  # a row with a column missing is refused, not half-read
