"""Where code runs, as it sees it: `durable.info()` (`RunInfo`) and a workflow class's
task hooks (`TaskInfo`). Values for user code, not records of the storage seam; stored
data names them by their first module (``durable._records``, see `core/names.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """Where the code calling `durable.info()` runs: which run, and which task in it."""

    #: the run's id, and the workflow (or task, for a task run on its own) it runs.
    run_id: str
    workflow: str
    #: the run that started this one, for a child run.
    parent_id: str | None
    #: in a task body: the task's name, its position in the run, and the attempt (from
    #: 1); None in workflow code.
    task: str | None = None
    position: int | None = None
    attempt: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskInfo:
    """A task call of a workflow class's run, as its hooks see it (``on_start``,
    ``on_success``, ``on_failure``, ``on_timeout``)."""

    #: the task's name, and the call's position in the run.
    name: str
    position: int
    #: the call's arguments, by parameter name.
    arguments: Mapping[str, Any]
    #: the attempts the call took (0 in ``on_start``: none has ended yet).
    attempts: int = 0
