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

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from durable.core.chains import split
from durable.errors import BadAnswer, FlowRefused, UnknownTask

from .spec import FlowSpec, TaskSpec, check_form

#: not_ready: a dependency has not finished; ready: may start (waits for a slot);
#: waiting: a human task ready for its answer; running; finished; failed; killed.
STATUSES = ("not_ready", "ready", "waiting", "running", "finished", "failed", "killed")
#: each status's letter in a snapshot (one per task, in file order).
_CODE = dict(zip(STATUSES, "nywrfxk", strict=True))
_STATUS = {code: status for status, code in _CODE.items()}
assert len(_STATUS) == len(STATUSES), "two statuses share a letter"
#: statuses from which `restart` may start a task again.
RESTARTABLE = frozenset({"finished", "failed", "killed", "waiting"})
#: the longest note kept on a task (its error, a refusal), in characters.
NOTE_LIMIT = 500
#: an ended launch's outcome statuses.
ENDED = frozenset({"finished", "failed", "killed"})


@dataclass(slots=True)
class Launch:
    """What the workflow must start: a command or nested flow (``kind``) for a task."""

    task: str
    kind: str


class Board:
    """One flow instance's tasks and their statuses.

    Readiness is kept incrementally (a count of unfinished dependencies per task, and a
    heap of ready tasks in file order), so an event costs what it touches, not a walk
    over every task: a flow replays all its events each time it wakes up.
    """

    def __init__(self, spec: FlowSpec, base: str = "") -> None:
        self.spec = spec
        self.base = base  # the flow's id (its chain's first run's id)
        self.names = list(spec.tasks)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.status: dict[str, str] = dict.fromkeys(self.names, "not_ready")
        self.runs: dict[str, str] = {}  # task -> the run id of its current launch
        self.launches: dict[str, int] = dict.fromkeys(self.names, 0)
        self.human: dict[str, dict[str, Any]] = {}  # task -> {"data", "by", "at", "status"}
        self.notes: dict[str, str] = {}  # task -> why it failed, or a request was refused
        self.attempts: dict[str, int] = dict.fromkeys(self.names, 0)
        self._dependents = {name: spec.dependents(name) for name in self.names}
        self._below: dict[str, frozenset[str]] = {}  # a human task's descendants, once asked
        self._codes = bytearray(b"n" * len(self.names))
        self._count = dict.fromkeys(STATUSES, 0)
        self._count["not_ready"] = len(self.names)
        self._blocked = {name: len(spec.tasks[name].depends_on) for name in self.names}
        self._fresh = [i for i, name in enumerate(self.names) if not self._blocked[name]]
        heapq.heapify(self._fresh)  # not_ready tasks whose dependencies all finished
        self._ready: list[int] = []  # heap of READY command and nested-flow tasks
        # The snapshot's packed columns, kept as each value changes (`snapshot`).
        self._runs = ["-"] * len(self.names)
        self._launches = ["0"] * len(self.names)
        self._attempts = ["0"] * len(self.names)

    def _run(self, name: str, run_id: str | None) -> None:
        if run_id is None:
            self.runs.pop(name, None)
        else:
            self.runs[name] = run_id
        self._runs[self.index[name]] = self._pack(run_id)

    def _number(self, values: dict[str, int], packed: list[str], name: str, value: int) -> None:
        values[name] = value
        packed[self.index[name]] = str(value)

    def _set(self, name: str, status: str) -> None:
        old = self.status[name]
        if old == status:
            return
        self.status[name] = status
        self._count[old] -= 1
        self._count[status] += 1
        self._codes[self.index[name]] = ord(_CODE[status])
        if status == "finished":
            for dependent in self._dependents[name]:
                self._blocked[dependent] -= 1
                if not self._blocked[dependent] and self.status[dependent] == "not_ready":
                    heapq.heappush(self._fresh, self.index[dependent])
        elif old == "finished":
            for dependent in self._dependents[name]:
                self._blocked[dependent] += 1

    @classmethod
    def restore(cls, spec: FlowSpec, snapshot: Mapping[str, Any], base: str = "") -> Board:
        """The board a flow run published (`snapshot`), to check a verb against, to
        show, and to go on from in the next run of a chain; an empty snapshot is a flow
        that has not started yet."""
        board = cls(spec, base)
        codes = str(snapshot.get("codes") or "")
        if len(codes) == len(board.names):
            for name, code in zip(board.names, codes, strict=True):
                board._set(name, _STATUS[code])
            runs = str(snapshot.get("runs") or "").split(" ")
            launches = str(snapshot.get("launches") or "").split(" ")
            attempts = str(snapshot.get("attempts") or "").split(" ")
            for i, name in enumerate(board.names):
                if i < len(runs) and runs[i] not in ("", "-"):
                    board._run(name, board._unpack(runs[i]))
                board._number(board.launches, board._launches, name, _int(launches, i))
                board._number(board.attempts, board._attempts, name, _int(attempts, i))
            for name in board.names:
                if board.status[name] == "ready":
                    board._set(name, "not_ready")  # made ready again by advance()
            board._fresh = [
                board.index[n]
                for n in board.names
                if board.status[n] == "not_ready" and not board._blocked[n]
            ]
            heapq.heapify(board._fresh)
        board.human = dict(snapshot.get("human") or {})
        board.notes = dict(snapshot.get("notes") or {})
        return board

    # -- what to do next --------------------------------------------------------------

    def advance(self) -> tuple[list[Launch], list[str]]:
        """Mark newly ready tasks, and choose what starts now: the command and nested
        flow tasks that fit in ``max_running`` (file order), and the human tasks that
        become ``waiting`` (returned second: the workflow notifies their assignees)."""
        asked: list[str] = []
        while self._fresh:
            name = self.names[heapq.heappop(self._fresh)]
            if self.status[name] != "not_ready" or self._blocked[name]:
                continue  # stale: it changed since it was pushed
            if self.spec.tasks[name].kind == "human":
                self._set(name, "waiting")
                asked.append(name)
            else:
                self._set(name, "ready")
                heapq.heappush(self._ready, self.index[name])
        launches: list[Launch] = []
        limit = self.spec.max_running
        free = len(self._ready) if limit is None else limit - self._count["running"]
        while self._ready and free > 0:
            name = self.names[heapq.heappop(self._ready)]
            if self.status[name] == "ready":
                launches.append(Launch(name, self.spec.tasks[name].kind))
                free -= 1
        return launches, asked

    def started(self, task: str, run_id: str) -> None:
        """The workflow dispatched *task*'s launch as run *run_id*."""
        self._set(task, "running")
        self._run(task, run_id)
        self._number(self.launches, self._launches, task, self.launches[task] + 1)

    # -- where it stands --------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """Every task finished: the flow is done."""
        return self._count["finished"] == len(self.names)

    @property
    def stuck(self) -> bool:
        """Nothing runs, nothing can start or is asked of a human, yet not all finished:
        a task failed (or was killed) and blocks what depends on it. The flow waits for
        a restart."""
        if self.complete:
            return False
        if self._count["ready"] or self._count["waiting"] or self._count["running"]:
            return False
        return not any(
            self.status[self.names[i]] == "not_ready" and not self._blocked[self.names[i]]
            for i in self._fresh
        )

    def counts(self) -> dict[str, int]:
        """How many tasks are in each status (those with none left out)."""
        return {status: count for status, count in self._count.items() if count}

    # -- events -------------------------------------------------------------------------

    def ended(self, task: str, run_id: str, outcome: Mapping[str, Any]) -> bool:
        """A launch ended. False (and nothing changes) if it is not the task's current
        launch: a restart replaced it, or the task is unknown. A nested flow that
        reported a failure (it got stuck) may end finished later, once restarted inside."""
        status = self.status.get(task)
        again = status == "failed" and self.spec.tasks[task].kind == "flow"
        if self.runs.get(task) != run_id or (status != "running" and not again):
            return False
        ended = outcome.get("status")
        self._set(task, ended if ended in ENDED else "failed")
        error = outcome.get("error")
        if self.status[task] != "finished" and error:
            self.notes[task] = str(error)[:NOTE_LIMIT]  # why it failed, for the views
        else:
            self.notes.pop(task, None)
        self._number(self.attempts, self._attempts, task, int(outcome.get("attempts") or 0))
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
        self._set(task, status)
        self._number(self.attempts, self._attempts, task, self.attempts[task] + 1)
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
            self._set(name, "not_ready")
            self._run(name, None)
            self.human.pop(name, None)
            self.notes.pop(name, None)
        for name in again:
            if not self._blocked[name]:
                heapq.heappush(self._fresh, self.index[name])
        return again

    def check_task(self, task: str) -> TaskSpec:
        """*task*'s definition, or `UnknownTask` listing the flow's tasks."""
        return self._task(task)

    def inputs(self, task: str) -> dict[str, Any]:
        """The answers (data) of the human tasks upstream of *task*, by task: what a
        command receives as ``$DURABLE_INPUT``."""
        return {
            name: answer["data"]
            for name, answer in sorted(self.human.items(), key=lambda item: self.index[item[0]])
            if task in self._downstream(name)
        }

    def _downstream(self, name: str) -> frozenset[str]:
        found = self._below.get(name)
        if found is None:
            found = self._below[name] = frozenset(self.spec.descendants(name))
        return found

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

    def _pack(self, run_id: str | None) -> str:
        """A launch's run id as ``<link>/<position>``: its flow run's place in the
        chain and the dispatch's position (run ids may hold spaces; these never do)."""
        if run_id is None:
            return "-"
        link, position = _link_and_position(run_id)
        return f"{link}/{position}"

    def _unpack(self, packed: str) -> str:
        link, _, position = packed.partition("/")
        flow = self.base if link == "0" else f"{self.base}~{link}"
        return f"{flow}/{position}"

    # -- the published form -----------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The board as the flow run's state, packed in strings (cheap to encode at
        every step of a replay): a status letter per task in file order, each task's
        current launch's run id (``-`` for none), launches and attempts."""
        return {
            "codes": self._codes.decode(),
            "runs": " ".join(self._runs),
            "launches": " ".join(self._launches),
            "attempts": " ".join(self._attempts),
            "human": self.human,
            "notes": self.notes,
            "stuck": self.stuck,
        }


def _int(values: list[str], i: int) -> int:
    return int(values[i]) if i < len(values) and values[i].isdigit() else 0


def _link_and_position(run_id: str) -> tuple[int, str]:
    link, _, position = run_id.rpartition("/")
    return split(link)[1], position


def statuses(names: list[str], snapshot: Mapping[str, Any]) -> dict[str, str]:
    """Each task's status from a `Board.snapshot` (all ``not_ready`` before the first)."""
    codes = snapshot.get("codes") or ""
    if len(codes) != len(names):
        return dict.fromkeys(names, "not_ready")
    return {name: _STATUS[code] for name, code in zip(names, codes, strict=True)}
