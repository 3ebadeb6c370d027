"""The tables of a flow file, checked key by key: ``[flow]`` and each ``[task.NAME]``
become the fields of a `FlowSpec` and its `TaskSpec` s, and the tasks' ``depends_on``
a graph without unknown names or cycles. `spec` builds the records from these fields.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from . import _graph, _values, forms, placeholders
from ._places import Path, Places

#: What a task can be.
KINDS = ("command", "human", "flow")

FLOW_KEYS = ("name", "description", "max_running", "notify", "log_limit")
COMMON_TASK_KEYS = ("kind", "depends_on", "description")
KIND_KEYS: Mapping[str, tuple[str, ...]] = {
    "command": ("command", "shell", "env", "cwd", "timeout", "retry"),
    "human": ("assignee", "form"),
    "flow": ("flow",),
}
TASK_KEYS = COMMON_TASK_KEYS + tuple(key for keys in KIND_KEYS.values() for key in keys)
RETRY_KEYS = ("attempts", "delay")
DEFAULT_LOG_LIMIT = 1_048_576

_CALLABLE = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*"
)


def document(places: Places, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``[flow]`` table and the table of tasks (by name, in file order)."""
    _known_keys(places, (), data, ("flow", "task"), "a flow file")
    if "flow" not in data:
        raise places.error(("flow",), 'missing: a flow file starts with [flow] and name = "...".')
    flow = _values.table(places, ("flow",), data["flow"])
    tasks = _values.table(places, ("task",), data.get("task", {}))
    if not tasks:
        raise places.error(
            ("task",), 'no tasks: add at least one [task.NAME] table, e.g. command = ["make"].'
        )
    return flow, tasks


def flow_fields(places: Places, table: dict[str, Any]) -> dict[str, Any]:
    """The flow's own fields, from its ``[flow]`` table."""
    _known_keys(places, ("flow",), table, FLOW_KEYS, "[flow]")
    if "name" not in table:
        raise places.error(
            ("flow", "name"), 'missing: give the flow a name, e.g. name = "release".'
        )
    fields: dict[str, Any] = {
        "name": _values.name(places, ("flow", "name"), table["name"], "flow name"),
        "description": _values.string(
            places, ("flow", "description"), table.get("description", ""), empty=True
        ),
        "log_limit": _values.size(
            places, ("flow", "log_limit"), table.get("log_limit", DEFAULT_LOG_LIMIT)
        ),
    }
    if "max_running" in table:
        fields["max_running"] = _values.positive_int(
            places, ("flow", "max_running"), table["max_running"]
        )
    if "notify" in table:
        fields["notify"] = _notify(places, ("flow", "notify"), table["notify"])
    return fields


def _notify(places: Places, path: Path, value: object) -> tuple[str, ...] | str:
    """A command (an argv array) or a ``"module:function"`` to call."""
    if isinstance(value, str):
        if not _CALLABLE.fullmatch(value):
            raise places.error(
                path,
                f'{value!r} is not "module:function" (e.g. "myapp.hooks:notify"); '
                'for a command, give an array: notify = ["./notify.sh"].',
            )
        return value
    return _argv(places, path, value, '["./notify.sh"]')


def task_fields(places: Places, name: str, table: object, base_dir: str) -> dict[str, Any]:
    """A task's fields, from its ``[task.NAME]`` table. A nested flow's file is given
    as ``flow_path`` (absolute), for the caller to load."""
    path = ("task", name)
    _values.name(places, path, name, "task name")
    table = _values.table(places, path, table)
    _known_keys(places, path, table, TASK_KEYS, "a task")
    kind = _kind(places, path, table)
    allowed = COMMON_TASK_KEYS + KIND_KEYS[kind]
    for key in table:
        if key not in allowed:
            owners = " or ".join(k for k, keys in KIND_KEYS.items() if key in keys)
            raise places.error(
                (*path, key),
                f"a {kind} task has no {key} ({key} is for {owners} tasks): "
                f"remove it, or change the task's kind.",
            )
    fields: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "depends_on": _depends_on(places, (*path, "depends_on"), table.get("depends_on", [])),
        "description": _values.string(
            places, (*path, "description"), table.get("description", ""), empty=True
        ),
    }
    if kind == "command":
        fields.update(_command_fields(places, path, table, base_dir))
    elif kind == "human":
        if "assignee" in table:
            fields["assignee"] = _values.string(places, (*path, "assignee"), table["assignee"])
        fields["form"] = forms.read_form(places, (*path, "form"), table.get("form", {}))
    else:
        relative = _values.string(places, (*path, "flow"), table["flow"])
        fields["flow_path"] = os.path.normpath(os.path.join(base_dir, relative))
    return fields


def _kind(places: Places, path: Path, table: dict[str, Any]) -> str:
    """The task's kind: given, or implied by ``command`` or ``flow``."""
    if "command" in table and "flow" in table:
        raise places.error(
            (*path, "flow"),
            "a task has either a command or a flow (a nested flow file), not both.",
        )
    if "kind" in table:
        kind = table["kind"]
        if kind not in KINDS:
            raise places.error(
                (*path, "kind"),
                f"{_values.kind_of(kind)} is not a kind: use one of "
                f"{', '.join(repr(k) for k in KINDS)}.",
            )
    elif "flow" in table:
        kind = "flow"
    elif "command" in table or not {"assignee", "form"} & set(table):
        kind = "command"
    else:
        raise places.error(
            (*path, "kind"), 'missing: a task with an assignee or a form needs kind = "human".'
        )
    required = {"command": "command", "flow": "flow"}.get(kind)
    if required is not None and required not in table:
        example = '["make", "dist"]' if kind == "command" else '"sub.toml"'
        raise places.error(
            (*path, required),
            f"missing: give {required} = {example}"
            + ('; or kind = "human", or flow = "sub.toml".' if kind == "command" else "."),
        )
    return str(kind)


def _command_fields(
    places: Places, path: Path, table: dict[str, Any], base_dir: str
) -> dict[str, Any]:
    """A command task's own fields: command, shell, env, cwd, timeout, retry."""
    fields: dict[str, Any] = {}
    shell = _values.boolean(places, (*path, "shell"), table.get("shell", False))
    command = table["command"]
    if shell:
        if not isinstance(command, str):
            raise places.error(
                (*path, "command"),
                f"with shell = true, command is one string run by /bin/sh -c, "
                f"not {_values.kind_of(command)}.",
            )
        fields["command"] = (_values.string(places, (*path, "command"), command),)
    else:
        hint = " (for a shell line, set shell = true)" if isinstance(command, str) else ""
        fields["command"] = _argv(places, (*path, "command"), command, f'["make", "dist"]{hint}')
    fields["shell"] = shell
    fields["env"] = _env(places, (*path, "env"), table.get("env", {}))
    # The file's directory by default, so that a spec says where its commands run
    # whoever runs it. cwd is a template like command: the directory's braces are literal.
    cwd = _values.string(places, (*path, "cwd"), table.get("cwd", "."))
    literal_base = base_dir.replace("{", "{{").replace("}", "}}")
    fields["cwd"] = os.path.normpath(os.path.join(literal_base, cwd))
    if "timeout" in table:
        fields["timeout"] = _values.duration(places, (*path, "timeout"), table["timeout"])
    if "retry" in table:
        retry = _values.table(places, (*path, "retry"), table["retry"])
        _known_keys(places, (*path, "retry"), retry, RETRY_KEYS, "retry")
        if "attempts" not in retry:
            raise places.error(
                (*path, "retry", "attempts"), "missing: e.g. retry = { attempts = 3 }."
            )
        fields["attempts"] = _values.positive_int(
            places, (*path, "retry", "attempts"), retry["attempts"]
        )
        fields["retry_delay"] = _values.duration(
            places, (*path, "retry", "delay"), retry.get("delay", 0), zero=True
        )
    for key in ("command", "env", "cwd"):
        _placeholders(places, (*path, key), fields.get(key))
    return fields


def _argv(places: Places, path: Path, value: object, example: str) -> tuple[str, ...]:
    """A non-empty array of strings whose first (the program) is not empty."""
    argv = _values.strings(places, path, value, example)
    if not argv or not argv[0]:
        raise places.error(path, f"must name a program to run, e.g. {example}.")
    return argv


def _env(places: Places, path: Path, value: object) -> dict[str, str]:
    """Environment variables: names without "=", string values."""
    env = _values.table(places, path, value)
    for key, item in env.items():
        if not key or "=" in key or "\0" in key:
            raise places.error((*path, key), 'is not a variable name (empty, or holds "=").')
        if not isinstance(item, str):
            raise places.error(
                (*path, key), f'must be a string (quote it: "{item}"), not {_values.kind_of(item)}.'
            )
        _values.string(places, (*path, key), item, empty=True)
    return dict(env)


def _depends_on(places: Places, path: Path, value: object) -> tuple[str, ...]:
    """The names a task depends on, each once."""
    names = _values.strings(places, path, value, '["build"]')
    for index, name in enumerate(names):
        if name in names[:index]:
            raise places.error(path, f"lists {name!r} twice.")
    return names


def _placeholders(places: Places, path: Path, value: object) -> None:
    """Every placeholder in *value* (a string, strings, or a table of them) is known."""
    if isinstance(value, str):
        try:
            placeholders.check(value)
        except ValueError as error:
            raise places.error(path, str(error)) from None
    elif isinstance(value, tuple):
        for item in value:
            _placeholders(places, path, item)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _placeholders(places, (*path, key), item)


def check_placeholders(places: Places, task: str, texts: Mapping[str, object]) -> None:
    """The placeholders of one task's command, env and cwd (*texts* by key) are known."""
    for key, value in texts.items():
        _placeholders(places, ("task", task, key), value)


def check_dependencies(places: Places, deps: Mapping[str, Sequence[str]]) -> None:
    """Every dependency names another task, and the tasks form no cycle."""
    for name, needs in deps.items():
        path = ("task", name, "depends_on")
        for need in needs:
            if need == name:
                raise places.error(path, f"task {name!r} depends on itself.")
            if need not in deps:
                raise places.error(
                    path,
                    f"unknown task {need!r} (tasks: {_listed(deps)}){_did_you_mean(need, deps)}",
                )
    if _graph.order(deps) is None:
        loop = _graph.cycle(deps) or []
        raise places.error(
            ("task", loop[0], "depends_on"),
            f"cycle: {' -> '.join(loop)} (each depends on the next): "
            "remove one of these dependencies.",
        )


def _known_keys(
    places: Places, path: Path, table: Mapping[str, object], valid: Sequence[str], what: str
) -> None:
    """Every key of *table* is one of *valid*; else name it, the valid ones, and a guess."""
    for key in table:
        if key not in valid:
            hint = _did_you_mean(key, valid)
            if hint == "." and path[:1] == ("task",) and isinstance(table[key], dict):
                hint = f'. A task name with a dot must be quoted: [task."{path[-1]}.{key}"].'
            raise places.error(
                (*path, key), f"unknown key in {what} (valid keys: {', '.join(valid)}){hint}"
            )


def _did_you_mean(word: str, choices: Sequence[str] | Mapping[str, object]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f". Did you mean {close[0]!r}?" if close else "."


def _listed(names: Mapping[str, object], most: int = 10) -> str:
    """Up to *most* names, for a message about a flow of any size."""
    shown = list(names)[:most]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")
