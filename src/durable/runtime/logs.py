"""Structured logs: the run fields on every log record from durable, the logger for
user code in workflows and tasks, and formatters that print them.

Every record logged to one of durable's loggers (`LOGGERS`) carries `FIELDS` as
attributes (what ``extra=`` sets): the run, workflow, position, task and attempt of the
code that logged it, None where there is none (a worker's own housekeeping). The
fields come from where the code runs (`context.current`): in workflow code, the run
and the position its next durable call takes; in a task body, its run, position, task
and attempt.

`logger` (``durable.logger``, named ``durable.user``) is for user code: it adds the
same fields, and drops what workflow code logs while it replays positions already
recorded: that code ran before, and its lines were logged then.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

from .activity import TaskScope
from .context import RunContext, current

#: The run fields every record from durable carries (None where unknown).
FIELDS = ("run_id", "workflow", "position", "task", "attempt")

#: durable's loggers: the engine (``durable``), workers, the command line, the web
#: app, process flows' nodes, and user code (``durable.user``, `logger`).
LOGGERS = (
    "durable",
    "durable.worker",
    "durable.cli",
    "durable.web",
    "durable.flows.nodes",
    "durable.user",
)

_NONE = dict.fromkeys(FIELDS)
#: what every LogRecord has: the rest of its attributes are a caller's ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    *FIELDS,
}


def fields() -> dict[str, Any]:
    """The run fields of the code calling this (see the module's docstring)."""
    where = current.get()
    if isinstance(where, RunContext):
        return {
            "run_id": where.run_id,
            "workflow": where.workflow,
            "position": where.replay.next_position,
            "task": None,
            "attempt": None,
        }
    if isinstance(where, TaskScope):
        return {
            "run_id": where.run_id,
            "workflow": where.workflow or None,
            "position": where.position,
            "task": where.task or None,
            "attempt": where.attempt,
        }
    return _NONE


def replaying() -> bool:
    """Whether workflow code is running again through positions its run has recorded
    (the next durable call's position holds a step): False in task bodies and outside
    runs."""
    where = current.get()
    return (
        isinstance(where, RunContext)
        and where.replay.recorded(where.replay.next_position) is not None
    )


class RunFields(logging.Filter):
    """Sets `FIELDS` on each record it sees, unless the caller's ``extra=`` did."""

    def filter(self, record: logging.LogRecord) -> bool:
        found = vars(record)
        for name, value in fields().items():
            found.setdefault(name, value)
        return True


class UserFields(RunFields):
    """`RunFields`, and drops the records workflow code makes while it replays."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not replaying() and super().filter(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: time (UTC, ISO 8601), level, logger,
    message, the run fields, any other ``extra=`` field, and the exception if any."""

    def format(self, record: logging.LogRecord) -> str:
        made = dt.datetime.fromtimestamp(record.created, dt.UTC)
        line: dict[str, Any] = {
            "time": made.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        found = vars(record)
        for name in FIELDS:
            line[name] = found.get(name)
        for name, value in found.items():
            if name not in _STANDARD:
                line.setdefault(name, value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=repr, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time level logger: message``, then the run fields that are set (``key=value``)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        found = vars(record)
        known = [f"{name}={found[name]}" for name in FIELDS if found.get(name) is not None]
        if not known:
            return text
        head, _, tail = text.partition("\n")  # after the message, before a traceback
        return f"{head} [{' '.join(known)}]" + (f"\n{tail}" if tail else "")


#: The logger user code inside workflows and tasks logs to (``durable.logger``).
logger = logging.getLogger("durable.user")


def _install() -> None:
    """Put the filters on durable's loggers (once: filters are kept by identity)."""
    for name in LOGGERS:
        target = logging.getLogger(name)
        kind = UserFields if target is logger else RunFields
        if not any(type(f) is kind for f in target.filters):
            target.addFilter(kind())


_install()
