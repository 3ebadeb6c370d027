"""Workflows the CLI tests run, then list, show, cancel, retry, signal and check.

Importable by name (``tests.integration.cli_app``), so `durable start --import` and
`durable check` can load it the way an operator loads an application.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from durable import task, wait, workflow

#: What `switchable` calls first. Tests flip it to "b" to play a code change under a
#: live run, which `durable check` must then report.
VARIANT = "a"


def note(log: str, line: str) -> None:
    """Append *line* to the file *log*: which task bodies ran, and how often."""
    with Path(log).open("a") as file:
        file.write(line + "\n")


@task
def add(x: int, y: int) -> int:
    return x + y


@workflow
def completes(x: int) -> int:
    """Two tasks, then a result."""
    return add(x, 1) + add(x, 2)


@task
def explode(message: str) -> None:
    raise ValueError(message)


@workflow
def fails(message: str) -> None:
    """Fails in its first task."""
    explode(message)


@task
def prepare(log: str) -> str:
    note(log, "prepare")
    return "prepared"


@task
def flaky(log: str, flag: str) -> str:
    """Fails until the file *flag* exists."""
    note(log, "flaky")
    if not Path(flag).exists():
        raise RuntimeError(f"no flag file at {flag} yet")
    return "done"


@workflow
def pipeline(log: str, flag: str) -> list[str]:
    """A task that succeeds, then one that fails until *flag* exists."""
    return [prepare(log), flaky(log, flag)]


@workflow
def approval(order: str) -> Any:
    """Waits for the event ``approved`` and returns its data."""
    return {"order": order, "approved": wait("approved")}


@workflow
def parent(x: int) -> int:
    """Runs `completes` as a child workflow."""
    return completes(x) * 10


@task
def step_a() -> str:
    return "a"


@task
def step_b() -> str:
    return "b"


@workflow
def switchable() -> str:
    """Calls `step_a` (or `step_b` after a "code change"), then waits for ``go``."""
    first = step_a() if VARIANT == "a" else step_b()
    wait("go")
    return first
