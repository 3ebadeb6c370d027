"""Structured logs: the run fields on durable's records, `durable.logger` quiet while
workflow code replays, and the formatters `durable worker --log-format` prints with."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from durable import task, workflow
from durable.runtime.logs import FIELDS, LOGGERS, JsonFormatter, RunFields, TextFormatter
from durable.testing import DurableEnv

SRC = Path(durable.__file__).parent


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as environment:
        yield environment


@task
def shout(x: int) -> int:
    durable.logger.info("shouting %d", x)
    logging.getLogger("durable").warning("engine line")
    return x * 10


@workflow
def chatty(x: int) -> int:
    durable.logger.info("before the wait")
    first = shout(x)
    durable.wait(dt.timedelta(hours=1))
    durable.logger.info("after the wait")
    return shout(first)


def _fields(record: logging.LogRecord) -> tuple[object, ...]:
    return tuple(getattr(record, name) for name in FIELDS)


def test_records_carry_the_run_fields_and_replayed_workflow_lines_are_dropped(
    env: DurableEnv, caplog: pytest.LogCaptureFixture
) -> None:
    """durable.logger in workflow code and task bodies, and the engine's own logger,
    stamp run id, workflow, position, task and attempt; the resumed execution replays
    the lines before the wait without logging them again."""
    caplog.set_level(logging.INFO, logger="durable")
    handle = env.dispatch(chatty, 2, id="talk")
    env.run_until_idle()
    assert handle.result() == 200
    seen = [
        (record.name, record.getMessage(), _fields(record))
        for record in caplog.records
        if record.name == "durable.user" or record.getMessage() == "engine line"
    ]
    workflow_name, task_name = chatty.name, shout.name
    assert seen == [
        ("durable.user", "before the wait", ("talk", workflow_name, 0, None, None)),
        ("durable.user", "shouting 2", ("talk", workflow_name, 0, task_name, 1)),
        ("durable", "engine line", ("talk", workflow_name, 0, task_name, 1)),
        # resumed: "before the wait" is replayed, not logged again
        ("durable.user", "after the wait", ("talk", workflow_name, 2, None, None)),
        ("durable.user", "shouting 20", ("talk", workflow_name, 2, task_name, 1)),
        ("durable", "engine line", ("talk", workflow_name, 2, task_name, 1)),
    ]


@task
def bill(x: int) -> int:
    durable.logger.getChild("billing").info("billing %d", x)
    logging.getLogger("app.billing").info("app line %d", x)
    return x


@workflow
def billed(x: int) -> int:
    return bill(x)


def test_a_handler_with_run_fields_stamps_every_loggers_records(env: DurableEnv) -> None:
    """Filters on a logger do not apply to its children's records, nor to other
    loggers': a child of durable.logger and the application's own logger carry no run
    fields by themselves. A handler with `RunFields` (what `durable worker` installs,
    and what docs/howto/observability.md tells an application to add) stamps them on
    every record it handles, from any logger."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    stamped = Keep()
    stamped.addFilter(RunFields())
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(stamped)
    try:
        handle = env.dispatch(billed, 7, id="billed")
        env.run_until_idle()
        assert handle.result() == 7
    finally:
        root.removeHandler(stamped)
        root.setLevel(level)
    lines = {r.getMessage(): r for r in records if r.getMessage() in ("billing 7", "app line 7")}
    assert set(lines) == {"billing 7", "app line 7"}
    for record in lines.values():
        assert _fields(record) == ("billed", billed.name, 0, bill.name, 1)


def test_outside_a_run_the_fields_are_none_and_extra_wins(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Outside any run the fields are None; a field the caller passes in ``extra=`` is
    kept."""
    caplog.set_level(logging.INFO, logger="durable")
    durable.logger.info("plain")
    durable.logger.info("mine", extra={"run_id": "given"})
    first, second = caplog.records
    assert _fields(first) == (None,) * len(FIELDS)
    assert second.run_id == "given"  # type: ignore[attr-defined]


def test_every_logger_durable_uses_is_listed() -> None:
    """Each logger name in durable's source is in LOGGERS (which get the fields), so
    a new module's logger cannot quietly lose them."""
    used = set()
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        used |= set(re.findall(r'getLogger\("([^"]+)"\)', text))
        if "getLogger(__name__)" in text:
            relative = path.relative_to(SRC.parent).with_suffix("")
            used.add(".".join(relative.parts))
    assert used, "no logger found: the scan is broken"
    assert used <= set(LOGGERS), f"not in LOGGERS: {sorted(used - set(LOGGERS))}"
    for name in LOGGERS:
        assert logging.getLogger(name).filters, f"{name} has no fields filter"


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("durable.user", logging.ERROR, "f.py", 1, "hi %s", ("x",), None)
    for name, value in extra.items():
        setattr(record, name, value)
    return record


def test_the_json_formatter_prints_one_object_per_line() -> None:
    """--log-format json: time, level, logger, message, every run field (None when not
    set), other extra fields, and the exception's traceback, on a single line."""
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        error = sys.exc_info()
    record = _record(run_id="r1", position=3, customer="c-42")
    record.exc_info = error
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["time"].endswith("Z") and parsed["level"] == "ERROR"
    assert (parsed["logger"], parsed["message"]) == ("durable.user", "hi x")
    assert {name: parsed[name] for name in FIELDS} == {
        "run_id": "r1",
        "position": 3,
        "workflow": None,
        "task": None,
        "attempt": None,
    }
    assert parsed["customer"] == "c-42"
    assert "ValueError: bad" in parsed["exception"]


def test_the_text_formatter_adds_the_fields_that_are_set() -> None:
    """--log-format text: the usual line, then the run fields that are set, before a
    traceback; a record with none is the plain line."""
    text = TextFormatter().format(_record(run_id="r1", task="app.t", attempt=2))
    assert text.endswith("ERROR durable.user: hi x [run_id=r1 task=app.t attempt=2]")
    assert TextFormatter().format(_record()).endswith("ERROR durable.user: hi x")
