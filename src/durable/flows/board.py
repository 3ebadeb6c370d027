"""The state of one flow instance, and its rules: which tasks are ready, which start
next, what an ended launch, a human answer or a restart changes. No I/O (sans-IO):
the flow workflow (`engine.py`) feeds it events and does what it says, and replay feeds
it the same events again.

A task's status is one of `STATUSES`. The whole board is published as the flow run's
state in a compact form (`snapshot`: a status letter per task in file order, the
position of each task's current launch, its launch count), so a 1,000-task flow
publishes a few KiB, not one dict per task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from durable.errors import BadAnswer, FlowRefused, UnknownTask

from .spec import FlowSpec, TaskSpec, check_form

#: not_ready: a dependency has not finished; ready: may start (waits for a slot);
#: waiting: a human task ready for its answer; running; finished; failed; killed.
STATUSES = ("not_ready", "ready", "waiting", "running", "finished", "failed", "killed")
_CODE = {status: status[0] if status != "killed" else "k" for status in STATUSES}
_CODE["failed"] = "x"
_STATUS = {code: status for status, code in _CODE.items()}
#: statuses from which `restart` may start a task again.
RESTARTABLE = frozenset({"finished", "failed", "killed", "waiting"})
#: an ended launch's outcome statuses.
ENDED = frozenset({"finished", "failed", "killed"})


@dataclass(slots=True)
class Launch:
    """What the workflow must start: a command or nested flow (``kind``) for a task."""

    task: str
    kind: str


class Board:
    """One flow instance's tasks and their statuses."""

    def __init__(self, spec: FlowSpec) -> None:
        self.spec = spec
        self.names = list(spec.tasks)
        self.status: dict[str, str] = dict.fromkeys(self.names, "not_ready")
        self.runs: dict[str, int] = {}  # task -> position of its current launch's dispatch
        self.launches: dict[str, int] = dict.fromkeys(self.names, 0)
        self.human: dict[str, dict[str, Any]] = {}  # task -> {"data", "by", "status"}
        self.notes: dict[str, str] = {}  # task -> why its last event was refused
        self.attempts: dict[str, int] = dict.fromkeys(self.names, 0)
        self._dependents = {name: spec.dependents(name) for name in self.names}

    @classmethod
    def restore(cls, spec: FlowSpec, snapshot: Mapping[str, Any]) -> Board:
        """The board a flow run published (`snapshot`), to check a verb against and to
        show; an empty snapshot is a flow that has not started yet."""
        board = cls(spec)
        board.status = statuses(board.names, snapshot)
        if len(snapshot.get("runs") or ()) == len(board.names):
            board.runs = {
                n: p for n, p in zip(board.names, snapshot["runs"], strict=True) if p >= 0
            }
            board.launches = dict(zip(board.names, snapshot["launches"], strict=True))
            board.attempts = dict(zip(board.names, snapshot["attempts"], strict=True))
        board.human = dict(snapshot.get("human") or {})
        board.notes = dict(snapshot.get("notes") or {})
        return board

    # -- what to do next --------------------------------------------------------------

    def advance(self) -> tuple[list[Launch], list[str]]:
        """Mark newly ready tasks, and choose what starts now: the command and nested
        flow tasks that fit in ``max_running`` (file order), and the human tasks that
        become ``waiting`` (returned second: the workflow notifies their assignees)."""
        for name in self.names:
            if self.status[name] == "not_ready" and self._deps_done(name):
                self.status[name] = "ready"
        free = self._free_slots()
        launches: list[Launch] = []
        asked: list[str] = []
        for name in self.names:
            if self.status[name] != "ready":
                continue
            kind = self.spec.tasks[name].kind
            if kind == "human":
                self.status[name] = "waiting"
                asked.append(name)
            elif free > 0:
                free -= 1
                launches.append(Launch(name, kind))
        return launches, asked

    def started(self, task: str, position: int) -> None:
        """The workflow dispatched *task*'s launch at *position*."""
        self.status[task] = "running"
        self.runs[task] = position
        self.launches[task] += 1

    def _deps_done(self, name: str) -> bool:
        return all(self.status[dep] == "finished" for dep in self.spec.tasks[name].depends_on)

    def _free_slots(self) -> int:
        limit = self.spec.max_running
        if limit is None:
            return len(self.names)
        running = sum(1 for status in self.status.values() if status == "running")
        return max(0, limit - running)

    # -- where it stands --------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """Every task finished: the flow is done."""
        return all(status == "finished" for status in self.status.values())

    @property
    def stuck(self) -> bool:
        """Nothing runs, nothing can start or is asked of a human, yet not all finished:
        a task failed (or was killed) and blocks what depends on it. The flow waits for
        a restart."""
        if self.complete:
            return False
        active = {"ready", "waiting", "running"}
        if any(status in active for status in self.status.values()):
            return False
        return not any(
            self.status[name] == "not_ready" and self._deps_done(name) for name in self.names
        )

    def counts(self) -> dict[str, int]:
        """How many tasks are in each status (those with none left out)."""
        found: dict[str, int] = {}
        for status in self.status.values():
            found[status] = found.get(status, 0) + 1
        return found

    # -- events -------------------------------------------------------------------------

    def ended(self, task: str, position: int, outcome: Mapping[str, Any]) -> bool:
        """A launch ended. False (and nothing changes) if it is not the task's current
        launch: a restart replaced it, or the task is unknown. A nested flow that
        reported a failure (it got stuck) may end finished later, once restarted inside."""
        if self.runs.get(task) != position or self.status.get(task) not in ("running", "failed"):
            return False
        status = outcome.get("status")
        self.status[task] = status if status in ENDED else "failed"
        self.attempts[task] = int(outcome.get("attempts") or 0)
        return True

    def check_done(self, task: str, status: str, data: Any) -> dict[str, Any]:
        """The checked answer of human task *task*, or `FlowRefused` saying why not."""
        spec = self._task(task)
        if spec.kind != "human":
            raise FlowRefused(
                f"task {task!r} is a {spec.kind} task; only human tasks are completed "
                "by hand. Restart it to run it again."
            )
        if self.status[task] != "waiting":
            raise FlowRefused(
                f"task {task!r} is {self.status[task]}, not waiting for its answer"
                + (
                    f": it waits for {', '.join(self._unfinished_deps(task))} to finish."
                    if self.status[task] == "not_ready"
                    else "."
                )
            )
        if status not in ("finished", "failed"):
            raise FlowRefused(f"a human task ends 'finished' or 'failed', not {status!r}.")
        try:
            return check_form(spec, data)
        except ValueError as error:
            raise BadAnswer(f"task {task!r}: {error}", task=task) from None

    def done(self, task: str, status: str, data: Any, by: str | None, at: float) -> None:
        """Human task *task* answered (checked first: raises `FlowRefused`)."""
        checked = self.check_done(task, status, data)
        self.status[task] = status
        self.attempts[task] += 1
        self.human[task] = {"data": checked, "by": by, "at": at, "status": status}

    def check_restart(self, task: str) -> list[str]:
        """The tasks a restart of *task* runs again (it, then its descendants), or
        `FlowRefused`."""
        self._task(task)
        if self.status[task] not in RESTARTABLE:
            raise FlowRefused(
                f"task {task!r} is {self.status[task]}: only a finished, failed, killed or "
                "waiting task can be restarted"
                + (". Kill it first." if self.status[task] == "running" else ".")
            )
        again = [task, *self.spec.descendants(task)]
        running = [name for name in again if self.status[name] == "running"]
        if running:
            raise FlowRefused(
                f"restarting {task!r} would run {', '.join(running)} again, which "
                f"{'is' if len(running) == 1 else 'are'} running now: kill "
                f"{'it' if len(running) == 1 else 'them'} first."
            )
        return again

    def restart(self, task: str) -> list[str]:
        """Make *task* and every task downstream of it not ready again; upstream
        results stay. Returns the tasks that will run again."""
        again = self.check_restart(task)
        for name in again:
            self.status[name] = "not_ready"
            self.runs.pop(name, None)
            self.human.pop(name, None)
            self.notes.pop(name, None)
        return again

    def check_task(self, task: str) -> TaskSpec:
        """*task*'s definition, or `UnknownTask` listing the flow's tasks."""
        return self._task(task)

    def inputs(self, task: str) -> dict[str, Any]:
        """The answers (data) of the human tasks upstream of *task*, by task: what a
        command receives as ``$DURABLE_INPUT``."""
        seen: set[str] = set()
        todo = list(self.spec.tasks[task].depends_on)
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(self.spec.tasks[name].depends_on)
        return {
            name: self.human[name]["data"]
            for name in self.names
            if name in seen and name in self.human
        }

    def _task(self, task: str) -> TaskSpec:
        spec = self.spec.tasks.get(task)
        if spec is None:
            raise UnknownTask(
                f"flow {self.spec.name!r} has no task {task!r}; its tasks: "
                f"{', '.join(self.names)}.",
                task=task,
            )
        return spec

    def _unfinished_deps(self, task: str) -> list[str]:
        return [d for d in self.spec.tasks[task].depends_on if self.status[d] != "finished"]

    # -- the published form -----------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The board as the flow run's state: small, JSON, in file order."""
        return {
            "codes": "".join(_CODE[self.status[name]] for name in self.names),
            "runs": [self.runs.get(name, -1) for name in self.names],
            "launches": [self.launches[name] for name in self.names],
            "attempts": [self.attempts[name] for name in self.names],
            "human": self.human,
            "notes": self.notes,
            "stuck": self.stuck,
        }


def statuses(names: list[str], snapshot: Mapping[str, Any]) -> dict[str, str]:
    """Each task's status from a `Board.snapshot` (all ``not_ready`` before the first)."""
    codes = snapshot.get("codes") or ""
    if len(codes) != len(names):
        return dict.fromkeys(names, "not_ready")
    return {name: _STATUS[code] for name, code in zip(names, codes, strict=True)}
