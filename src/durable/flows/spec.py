"""A flow file, read and checked: `FlowSpec` and its `TaskSpec` s (docs/reference/flow-file.md).

A flow file is TOML, one file per process: a ``[flow]`` table and one ``[task.NAME]``
table per task. `load` reads one (and the nested flow files its tasks name) into
frozen records the engine runs; every problem is a `FlowFileError` naming the file,
line and key, raised before anything starts. The records turn into JSON-able dicts
and back (`FlowSpec.to_dict`, `FlowSpec.from_dict`) so that a flow's run can store
the spec it was started with.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from durable.errors import FlowFileError

from . import _graph, _tables
from ._places import Places
from .forms import FIELD_TYPES, check_form
from .placeholders import PLACEHOLDERS, expand

__all__ = [
    "FIELD_TYPES",
    "PLACEHOLDERS",
    "FlowSpec",
    "TaskSpec",
    "check_form",
    "check_placeholders",
    "expand",
    "load",
    "loads",
]


def _frozen(mapping: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """A read-only copy of *mapping*: records are frozen all the way down."""
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One task of a flow: a command to run, a human step, or a nested flow.

    Attributes:
        name: unique in its flow; letters, digits, ``_``, ``-`` and ``.``.
        kind: ``"command"``, ``"human"`` or ``"flow"``.
        depends_on: the tasks that must finish successfully before this one is ready.
        command: the argv; with ``shell`` a 1-tuple holding the script for
            ``/bin/sh -c``. Each item is a template for `expand`.
        shell: whether ``command`` is a shell script.
        env: environment variables added to the engine's (values are templates).
        cwd: the working directory, absolute (a template); loaded from a file, the
            file's directory unless it says otherwise. None (in code): the engine's.
        timeout: seconds one attempt may run, or None.
        attempts: how many times the command may run in all (at least 1).
        retry_delay: seconds between attempts.
        assignee: who completes a human task, when named.
        form: a human task's fields: name to ``"str"``, ``"bool"``, ``"int"`` or
            ``"float"``, with a trailing ``"?"`` when optional.
        flow: a nested flow, already loaded.
        description: free text.
    """

    name: str
    kind: str
    depends_on: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    shell: bool = False
    env: Mapping[str, str] = field(default_factory=_frozen)
    cwd: str | None = None
    timeout: float | None = None
    attempts: int = 1
    retry_delay: float = 0.0
    assignee: str | None = None
    form: Mapping[str, str] = field(default_factory=_frozen)
    flow: FlowSpec | None = None
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", _frozen(self.env))
        object.__setattr__(self, "form", _frozen(self.form))
        object.__setattr__(self, "depends_on", tuple(self.depends_on))
        object.__setattr__(self, "command", tuple(self.command))

    def to_dict(self) -> dict[str, Any]:
        """The task as JSON-able values (its nested flow included)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "depends_on": list(self.depends_on),
            "command": list(self.command),
            "shell": self.shell,
            "env": dict(self.env),
            "cwd": self.cwd,
            "timeout": self.timeout,
            "attempts": self.attempts,
            "retry_delay": self.retry_delay,
            "assignee": self.assignee,
            "form": dict(self.form),
            "flow": None if self.flow is None else self.flow.to_dict(),
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskSpec:
        """The task `to_dict` gave."""
        timeout = data["timeout"]
        nested = data["flow"]
        return cls(
            name=data["name"],
            kind=data["kind"],
            depends_on=tuple(data["depends_on"]),
            command=tuple(data["command"]),
            shell=data["shell"],
            env=data["env"],
            cwd=data["cwd"],
            timeout=None if timeout is None else float(timeout),
            attempts=data["attempts"],
            retry_delay=float(data["retry_delay"]),
            assignee=data["assignee"],
            form=data["form"],
            flow=None if nested is None else FlowSpec.from_dict(nested),
            description=data["description"],
        )


@dataclass(frozen=True, slots=True)
class FlowSpec:
    """A flow: its tasks and their dependencies, checked to form a DAG.

    Attributes:
        name: the flow's name; letters, digits, ``_``, ``-`` and ``.``.
        tasks: the tasks by name, in file order.
        max_running: at most this many tasks run at once; None for no limit.
        description: free text.
        notify: called when a human task becomes ready: a command (argv) or a
            ``"module:function"``; None for nothing.
        log_limit: the bytes of output kept for each task attempt.
        source: the file it was loaded from (as given to `load`; nested flows'
            are absolute), or ``"<string>"``.

    Raises:
        FlowFileError: (when built) a dependency names no task, or they form a cycle.
    """

    name: str
    tasks: Mapping[str, TaskSpec]
    max_running: int | None = None
    description: str = ""
    notify: tuple[str, ...] | str | None = None
    log_limit: int = _tables.DEFAULT_LOG_LIMIT
    source: str = "<string>"
    _order: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _dependents: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", _frozen(self.tasks))
        for name, task in self.tasks.items():
            if task.name != name:
                raise ValueError(f"tasks[{name!r}] is a task named {task.name!r}.")
        deps = {name: task.depends_on for name, task in self.tasks.items()}
        _tables.check_dependencies(Places(self.source), deps)
        order = _graph.order(deps)
        assert order is not None  # check_dependencies refused cycles
        object.__setattr__(self, "_order", tuple(order))
        followers = _graph.dependents(deps)
        object.__setattr__(self, "_dependents", {k: tuple(v) for k, v in followers.items()})

    def order(self) -> list[str]:
        """The tasks in a topological order: each after all it depends on; among tasks
        that could come next, the one first in the file first."""
        return list(self._order)

    def dependents(self, name: str) -> list[str]:
        """The tasks that depend on *name* directly, in file order.

        Raises:
            KeyError: no task has that name.
        """
        return list(self._dependents[self._known(name)])

    def descendants(self, name: str) -> list[str]:
        """Every task that depends on *name*, directly or not, in topological order
        (*name* itself excluded): what runs again when *name* is restarted.

        Raises:
            KeyError: no task has that name.
        """
        found: set[str] = set()
        pending = [self._known(name)]
        while pending:
            for follower in self._dependents[pending.pop()]:
                if follower not in found:
                    found.add(follower)
                    pending.append(follower)
        return [task for task in self._order if task in found]

    def _known(self, name: str) -> str:
        if name not in self.tasks:
            raise KeyError(f"flow {self.name!r} has no task {name!r}")
        return name

    def to_dict(self) -> dict[str, Any]:
        """The flow as JSON-able values (tasks as a list in file order, nested flows
        included); `from_dict` gives it back."""
        return {
            "name": self.name,
            "tasks": [task.to_dict() for task in self.tasks.values()],
            "max_running": self.max_running,
            "description": self.description,
            "notify": list(self.notify) if isinstance(self.notify, tuple) else self.notify,
            "log_limit": self.log_limit,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlowSpec:
        """The flow `to_dict` gave: ``FlowSpec.from_dict(spec.to_dict()) == spec``.

        Raises:
            FlowFileError: *data* is not such a dict, or its dependencies are broken.
        """
        source = str(data.get("source", "<dict>"))
        try:
            tasks = [TaskSpec.from_dict(task) for task in data["tasks"]]
            notify = data["notify"]
            return cls(
                name=data["name"],
                tasks={task.name: task for task in tasks},
                max_running=data["max_running"],
                description=data["description"],
                notify=tuple(notify) if isinstance(notify, list) else notify,
                log_limit=data["log_limit"],
                source=source,
            )
        except (KeyError, TypeError, AttributeError) as error:
            raise Places(source).error(
                (), f"not a flow spec as FlowSpec.to_dict() writes it ({error!r})."
            ) from None


def load(path: str | os.PathLike[str]) -> FlowSpec:
    """The flow in the file at *path*, and the nested flow files it names (relative to
    its directory), checked.

    Raises:
        FlowFileError: the file cannot be read or used; the message names the file,
            line and key, and a cycle of nested files names them in order.
    """
    return _Loader().file(os.fspath(path), None)


def loads(text: str, source: str = "<string>", base_dir: str | None = None) -> FlowSpec:
    """The flow in *text*, checked. Relative ``cwd`` and nested ``flow`` paths are
    resolved against *base_dir* (default: the current directory); *source* names the
    text in messages.

    Raises:
        FlowFileError: the text cannot be used; the message names *source*, the line
            and the key.
    """
    return _Loader().text(text, source, os.path.abspath(base_dir or os.getcwd()))


def check_placeholders(spec: FlowSpec) -> None:
    """Every placeholder in the commands, env values and cwds of *spec*'s tasks (and
    its nested flows') is one of `PLACEHOLDERS`. `load` checks files this way; use it
    for a spec built in code.

    Raises:
        FlowFileError: an unknown placeholder or an unmatched brace, naming the key.
    """
    places = Places(spec.source)
    for task in spec.tasks.values():
        texts = {"command": task.command, "env": task.env, "cwd": task.cwd}
        _tables.check_placeholders(places, task.name, texts)
        if task.flow is not None:
            check_placeholders(task.flow)


class _Loader:
    """One `load`: the files being read (to refuse a nesting cycle) and those read
    (a file nested twice is read once)."""

    def __init__(self) -> None:
        self.reading: list[tuple[str, str]] = []  # (real path, source), outermost first
        self.read: dict[str, FlowSpec] = {}

    def file(self, source: str, referrer: tuple[Places, str] | None) -> FlowSpec:
        """The flow in the file *source*; *referrer* is the place and task naming it."""
        real = os.path.realpath(source)
        for position, (reading, _) in enumerate(self.reading):
            if reading == real:
                chain = [shown for _, shown in self.reading[position:]] + [
                    self.reading[position][1]
                ]
                raise self._error(
                    referrer, source, f"nested flows form a cycle: {' -> '.join(chain)}."
                )
        if real in self.read:
            return self.read[real]
        try:
            with open(source, "rb") as file:
                text = file.read().decode("utf-8")
        except FileNotFoundError:
            raise self._error(
                referrer, source, f"no flow file at {os.path.abspath(source)}."
            ) from None
        except (OSError, UnicodeDecodeError) as error:
            raise self._error(referrer, source, f"cannot be read: {error}.") from None
        self.reading.append((real, source))
        try:
            spec = self.text(text, source, os.path.dirname(os.path.abspath(source)))
        finally:
            self.reading.pop()
        self.read[real] = spec
        return spec

    @staticmethod
    def _error(referrer: tuple[Places, str] | None, source: str, problem: str) -> FlowFileError:
        if referrer is None:
            return Places(source).error((), problem)
        places, task = referrer
        return places.error(("task", task, "flow"), problem)

    def text(self, text: str, source: str, base_dir: str) -> FlowSpec:
        """The flow in *text*, nested flows read relative to *base_dir*."""
        places = Places(source, text)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise _malformed(places, error, text) from None
        flow, tables = _tables.document(places, data)
        flow_fields = _tables.flow_fields(places, flow)
        tasks: dict[str, TaskSpec] = {}
        for name, table in tables.items():
            task_fields = _tables.task_fields(places, name, table, base_dir)
            nested = task_fields.pop("flow_path", None)
            if nested is not None:
                task_fields["flow"] = self.file(nested, (places, name))
            tasks[name] = TaskSpec(**task_fields)
        _tables.check_dependencies(places, {name: t.depends_on for name, t in tasks.items()})
        return FlowSpec(tasks=tasks, source=source, **flow_fields)


def _malformed(places: Places, error: tomllib.TOMLDecodeError, text: str) -> FlowFileError:
    """tomllib's error at its line (the last one for "at end of document": an array or
    string never closed); a table declared twice (a task's name taken twice) explained."""
    message = str(error)
    line = _line_of(message)
    if line is None and "at end of document" in message:
        line = max(1, len(text.splitlines()))
    if message.startswith("Cannot declare ("):
        inner = message[len("Cannot declare (") : message.index(")")]
        path = tuple(part.strip().strip("'\"") for part in inner.split(",") if part.strip())
        unique = " (task names are unique)" if path[:1] == ("task",) else ""
        problem = f"declared twice: each table appears once{unique}. TOML: {message}"
        return places.error(path, problem, line=line)
    return places.error((), f"malformed TOML: {message}", line=line)


def _line_of(message: str) -> int | None:
    """The line tomllib's message points at, if it does."""
    match = re.search(r"\(at line (\d+),", message)
    return int(match.group(1)) if match else None
