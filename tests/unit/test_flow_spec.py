"""Flow files (issue 18): read into frozen specs, and every bad input a clear error
naming the file, the line and the key (docs/reference/flow-file.md)."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from durable.errors import FlowFileError
from durable.flows.spec import (
    PLACEHOLDERS,
    FlowSpec,
    TaskSpec,
    check_form,
    check_placeholders,
    expand,
    load,
    loads,
)

RELEASE = """\
[flow]
name = "release"
max_running = 4
description = "Ship it"
notify = ["./notify.sh"]
log_limit = "2MB"

[task.build]
command = ["make", "dist"]
[task.unit]
command = ["pytest", "-q"]
depends_on = ["build"]
retry = { attempts = 2, delay = "10s" }
timeout = "30m"
[task.ui_check]
kind = "human"
assignee = "qa@example.com"
form = { approved = "bool", notes = "str?" }
depends_on = ["build"]
[task.upload]
command = ["./upload.sh", "{flow.id}"]
depends_on = ["unit", "ui_check"]
env = { TARGET = "prod" }
cwd = "dist"
[task.etl]
flow = "sub.toml"
depends_on = ["build"]
[task.announce]
command = "echo done > {task.name}.txt"
shell = true
depends_on = ["upload"]
"""

SUB = """\
[flow]
name = "etl"
[task.extract]
command = ["extract"]
"""

HEAD = '[flow]\nname = "f"\n'  # lines 1 and 2
A = '[task.a]\ncommand = ["a"]\n'


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text)
    return path


def refused(directory: Path, text: str) -> FlowFileError:
    """The error loading *text* from a file bad.toml raises."""
    with pytest.raises(FlowFileError) as caught:
        load(write(directory, "bad.toml", text))
    return caught.value


def test_release_example_loads_to_its_model(tmp_path: Path) -> None:
    """The release example becomes exactly these records: kinds implied, durations in
    seconds, sizes in bytes, cwd and the nested flow resolved against the file's folder."""
    write(tmp_path, "sub.toml", SUB)
    path = write(tmp_path, "release.toml", RELEASE)
    etl = FlowSpec(
        name="etl",
        tasks={
            "extract": TaskSpec(
                name="extract", kind="command", command=("extract",), cwd=str(tmp_path)
            )
        },
        source=str(tmp_path / "sub.toml"),
    )
    expected = FlowSpec(
        name="release",
        max_running=4,
        description="Ship it",
        notify=("./notify.sh",),
        log_limit=2 * 1024 * 1024,
        source=str(path),
        tasks={
            "build": TaskSpec(
                name="build", kind="command", command=("make", "dist"), cwd=str(tmp_path)
            ),
            "unit": TaskSpec(
                name="unit",
                kind="command",
                command=("pytest", "-q"),
                depends_on=("build",),
                attempts=2,
                retry_delay=10.0,
                timeout=1800.0,
                cwd=str(tmp_path),
            ),
            "ui_check": TaskSpec(
                name="ui_check",
                kind="human",
                assignee="qa@example.com",
                form={"approved": "bool", "notes": "str?"},
                depends_on=("build",),
            ),
            "upload": TaskSpec(
                name="upload",
                kind="command",
                command=("./upload.sh", "{flow.id}"),
                depends_on=("unit", "ui_check"),
                env={"TARGET": "prod"},
                cwd=str(tmp_path / "dist"),
            ),
            "etl": TaskSpec(name="etl", kind="flow", flow=etl, depends_on=("build",)),
            "announce": TaskSpec(
                name="announce",
                kind="command",
                command=("echo done > {task.name}.txt",),
                shell=True,
                depends_on=("upload",),
                cwd=str(tmp_path),
            ),
        },
    )
    spec = load(path)
    assert spec == expected
    assert list(spec.tasks) == ["build", "unit", "ui_check", "upload", "etl", "announce"]
    with pytest.raises(TypeError):
        spec.tasks["x"] = spec.tasks["build"]  # type: ignore[index]
    with pytest.raises(TypeError):
        spec.tasks["upload"].env["TARGET"] = "dev"  # type: ignore[index]


def test_defaults_of_a_minimal_file() -> None:
    """A flow with one command: no limit, 1 MB logs, one attempt, no timeout, run in the
    directory the text is relative to (the current one for a string)."""
    spec = loads(HEAD + A)
    assert (spec.max_running, spec.log_limit, spec.notify, spec.source) == (
        None,
        1_048_576,
        None,
        "<string>",
    )
    task = spec.tasks["a"]
    assert (task.kind, task.attempts, task.retry_delay, task.timeout, task.cwd) == (
        "command",
        1,
        0.0,
        None,
        os.getcwd(),
    )
    assert loads(HEAD + A + 'cwd = "../out"\n', base_dir="/srv/flows").tasks["a"].cwd == "/srv/out"
    assert loads(HEAD + A + 'cwd = "/abs"\n', base_dir="/srv/flows").tasks["a"].cwd == "/abs"


def test_cwd_is_a_template_whose_base_braces_are_literal() -> None:
    """A directory with braces in its name stays itself once the cwd is expanded."""
    cwd = loads(HEAD + A + 'cwd = "{flow.id}"\n', base_dir="/srv/{odd}").tasks["a"].cwd
    assert cwd is not None
    assert expand(cwd, {"flow.id": "rel-42"}) == "/srv/{odd}/rel-42"


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ('"90s"', 90),
        ('"30m"', 1800),
        ('"2h"', 7200),
        ('"1d"', 86400),
        ('"1h30m"', 5400),
        ('"1.5h"', 5400),
        ('"1d2h3m4s"', 93784),
        ("45", 45),
        ("2.5", 2.5),
    ],
)
def test_durations(written: str, seconds: float) -> None:
    """Durations are a number of seconds, or a string of d, h, m, s amounts in that order."""
    assert loads(HEAD + A + f"timeout = {written}\n").tasks["a"].timeout == seconds


@pytest.mark.parametrize(
    ("written", "size"), [("2048", 2048), ('"512KB"', 524288), ('"2mb"', 2097152)]
)
def test_log_limits(written: str, size: int) -> None:
    """log_limit takes bytes, or a size in KB, MB or GB (1024-based, any case)."""
    assert loads(f"{HEAD}log_limit = {written}\n{A}").log_limit == size


def test_notify_as_a_callable_and_optional_form_fields() -> None:
    """notify may name a Python callable; a human task may have no form at all."""
    spec = loads(
        '[flow]\nname = "f"\nnotify = "myapp.hooks:notify"\n'
        '[task.ok]\nkind = "human"\n[task."v1.2"]\ncommand = ["a"]\ndepends_on = ["ok"]\n'
    )
    assert spec.notify == "myapp.hooks:notify"
    assert spec.tasks["ok"].form == {} and spec.tasks["ok"].assignee is None
    assert spec.tasks["v1.2"].depends_on == ("ok",)


def test_round_trip_through_json(tmp_path: Path) -> None:
    """to_dict is JSON-able (nested flows included) and from_dict is its exact inverse."""
    write(tmp_path, "sub.toml", SUB)
    spec = load(write(tmp_path, "release.toml", RELEASE))
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["tasks"][4]["flow"]["tasks"][0]["name"] == "extract"
    again = FlowSpec.from_dict(data)
    assert again == spec and again.order() == spec.order()
    assert FlowSpec.from_dict(loads(HEAD + A).to_dict()) == loads(HEAD + A)


def test_from_dict_refuses_what_to_dict_never_wrote() -> None:
    """A dict of another shape, or with a cycle, is a FlowFileError, not a KeyError."""
    with pytest.raises(FlowFileError, match="not a flow spec"):
        FlowSpec.from_dict({"name": "x", "source": "s.toml"})
    data = loads(HEAD + A + '[task.b]\ncommand = ["b"]\ndepends_on = ["a"]\n').to_dict()
    data["tasks"][0]["depends_on"] = ["b"]
    with pytest.raises(FlowFileError, match=r"cycle: a -> b -> a"):
        FlowSpec.from_dict(data)


DIAMOND = HEAD + (
    '[task.top]\ncommand = ["t"]\n'
    '[task.right]\ncommand = ["r"]\ndepends_on = ["top"]\n'
    '[task.left]\ncommand = ["l"]\ndepends_on = ["top"]\n'
    '[task.alone]\ncommand = ["x"]\n'
    '[task.bottom]\ncommand = ["b"]\ndepends_on = ["left", "right"]\n'
    '[task.after]\ncommand = ["z"]\ndepends_on = ["bottom"]\n'
)


def test_order_dependents_descendants_of_a_diamond() -> None:
    """Order puts dependencies first and breaks ties by file order; dependents are
    direct, descendants transitive and in topological order."""
    spec = loads(DIAMOND)
    assert spec.order() == ["top", "right", "left", "alone", "bottom", "after"]
    assert spec.dependents("top") == ["right", "left"]
    assert spec.dependents("left") == ["bottom"]
    assert spec.dependents("after") == []
    assert spec.descendants("top") == ["right", "left", "bottom", "after"]
    assert spec.descendants("left") == ["bottom", "after"]
    assert spec.descendants("alone") == []
    with pytest.raises(KeyError, match="no task 'nope'"):
        spec.descendants("nope")


def test_a_spec_built_in_code_is_checked() -> None:
    """Built in code, a flow still refuses unknown dependencies and cycles; its
    placeholders are checked on request."""
    with pytest.raises(FlowFileError, match=r"<string>: task\.a\.depends_on: unknown task 'b'"):
        FlowSpec(name="f", tasks={"a": TaskSpec(name="a", kind="command", depends_on=("b",))})
    spec = FlowSpec(
        name="f",
        tasks={"a": TaskSpec(name="a", kind="command", command=("echo", "{flow.idd}"))},
    )
    with pytest.raises(FlowFileError, match=r"task\.a\.command: unknown placeholder \{flow\.idd\}"):
        check_placeholders(spec)


# (text of bad.toml, its line at fault, the key at fault, what the message must say)
BAD: list[tuple[str, int | None, str | None, str]] = [
    # malformed TOML, with tomllib's own line
    (HEAD + '[task.a]\ncommand = ["a"\n', 4, None, "malformed TOML"),
    (HEAD + "[task.a]\ncommand = \n", 4, None, "malformed TOML: Invalid value"),
    # duplicate task names: TOML refuses a table declared twice
    (HEAD + A + A, 5, "task.a", "declared twice: each table appears once (task names are unique)"),
    # the file's shape
    (A, None, "flow", 'missing: a flow file starts with [flow] and name = "..."'),
    ("[flow]\nmax_running = 2\n" + A, 1, "flow.name", "missing: give the flow a name"),
    (HEAD, None, "task", "no tasks: add at least one [task.NAME] table"),
    (
        "version = 2\n" + HEAD + A,
        1,
        "version",
        "unknown key in a flow file (valid keys: flow, task)",
    ),
    (HEAD + "max_runing = 2\n" + A, 3, "flow.max_runing", "Did you mean 'max_running'?"),
    (HEAD + '[task.a]\ncomand = ["a"]\n', 4, "task.a.comand", "Did you mean 'command'?"),
    (HEAD + '[task.a.b]\ncommand = ["a"]\n', 3, "task.a.b", 'must be quoted: [task."a.b"]'),
    (HEAD + "[task]\na = 3\n", 4, "task.a", "must be a table, not the number 3"),
    # wrong types
    (HEAD + "max_running = 0\n" + A, 3, "flow.max_running", "at least 1, not the number 0"),
    (HEAD + "max_running = true\n" + A, 3, "flow.max_running", "not the boolean true"),
    (HEAD + 'max_running = "4"\n' + A, 3, "flow.max_running", "not the string '4'"),
    (HEAD + "name = 3\n" + A, 3, None, "malformed TOML: Cannot overwrite a value"),
    ('[flow]\nname = "my flow"\n' + A, 2, "flow.name", "flow name 'my flow' is not allowed"),
    (HEAD + 'description = ["x"]\n' + A, 3, "flow.description", "must be a string, not an array"),
    (HEAD + 'notify = "nomodule"\n' + A, 3, "flow.notify", 'is not "module:function"'),
    (HEAD + "notify = []\n" + A, 3, "flow.notify", "must name a program to run"),
    (
        HEAD + '[task.a]\ncommand = "make dist"\n',
        4,
        "task.a.command",
        "for a shell line, set shell",
    ),
    (HEAD + "[task.a]\ncommand = []\n", 4, "task.a.command", "must name a program to run"),
    (HEAD + '[task.a]\ncommand = ["", "x"]\n', 4, "task.a.command", "must name a program"),
    (HEAD + '[task.a]\ncommand = [\n  "make",\n  2,\n]\n', 4, "task.a.command", "item 1 must be"),
    (HEAD + A + "shell = true\n", 4, "task.a.command", "with shell = true, command is one string"),
    (HEAD + A + 'shell = "yes"\n', 5, "task.a.shell", "must be true or false"),
    (
        HEAD + A + "env = { TARGET = 1 }\n",
        5,
        "task.a.env.TARGET",
        'must be a string (quote it: "1")',
    ),
    (HEAD + A + 'env = ["A=1"]\n', 5, "task.a.env", "must be a table, not an array"),
    (HEAD + A + 'cwd = ""\n', 5, "task.a.cwd", "must not be empty"),
    (HEAD + A + 'depends_on = "b"\n', 5, "task.a.depends_on", 'array of strings, e.g. ["build"]'),
    # kinds
    (HEAD + A + 'flow = "sub.toml"\n', 5, "task.a.flow", "either a command or a flow"),
    (HEAD + '[task.a]\ndescription = "nothing"\n', 3, "task.a.command", "missing: give command"),
    (HEAD + A + 'kind = "human"\n', 4, "task.a.command", "a human task has no command"),
    (HEAD + A + 'kind = "robot"\n', 5, "task.a.kind", "the string 'robot' is not a kind"),
    (HEAD + A + 'form = { ok = "bool" }\n', 5, "task.a.form", "a command task has no form"),
    (HEAD + '[task.a]\nkind = "human"\ntimeout = 5\n', 5, "task.a.timeout", "human task has no"),
    (HEAD + '[task.a]\nassignee = "x"\n', 3, "task.a.kind", 'needs kind = "human"'),
    (HEAD + '[task.a]\nkind = "flow"\n', 3, "task.a.flow", "missing: give flow"),
    # dependencies
    (
        HEAD + A + '[task.b]\ncommand = ["b"]\ndepends_on = ["a", "aa"]\n',
        7,
        "task.b.depends_on",
        "unknown task 'aa' (tasks: a, b). Did you mean 'a'?",
    ),
    (HEAD + A + 'depends_on = ["a"]\n', 5, "task.a.depends_on", "task 'a' depends on itself"),
    (HEAD + A + 'depends_on = ["b", "b"]\n', 5, "task.a.depends_on", "lists 'b' twice"),
    (
        HEAD
        + '[task.c]\ncommand = ["c"]\ndepends_on = ["b"]\n'
        + '[task.a]\ncommand = ["a"]\ndepends_on = ["c"]\n'
        + '[task.b]\ncommand = ["b"]\ndepends_on = ["a"]\n',
        5,
        "task.c.depends_on",
        "cycle: c -> b -> a -> c (each depends on the next)",
    ),
    # durations, retries, sizes, forms
    (HEAD + A + 'timeout = "30 minutes"\n', 5, "task.a.timeout", "'30 minutes' is not a duration"),
    (HEAD + A + 'timeout = "-5s"\n', 5, "task.a.timeout", "'-5s' is not a duration"),
    (HEAD + A + 'timeout = "45"\n', 5, "task.a.timeout", "'45' is not a duration"),
    (HEAD + A + 'timeout = "30m1h"\n', 5, "task.a.timeout", "'30m1h' is not a duration"),
    (HEAD + A + "timeout = -5\n", 5, "task.a.timeout", "more than 0 seconds, not the number -5"),
    (HEAD + A + "timeout = 0\n", 5, "task.a.timeout", "more than 0 seconds"),
    (HEAD + A + 'timeout = "0s"\n', 5, "task.a.timeout", "more than 0 seconds"),
    (HEAD + A + "timeout = inf\n", 5, "task.a.timeout", "not the number inf"),
    (HEAD + A + 'timeout = "200000d"\n', 5, "task.a.timeout", "at most 100 years"),
    (HEAD + A + "retry = { attempts = 0 }\n", 5, "task.a.retry.attempts", "at least 1"),
    (HEAD + A + 'retry = { delay = "1s" }\n', 5, "task.a.retry.attempts", "missing"),
    (HEAD + A + "retry = { attempts = 2, wait = 1 }\n", 5, "task.a.retry.wait", "valid keys"),
    (HEAD + A + 'retry = { attempts = 2, delay = "-1s" }\n', 5, "task.a.retry.delay", "not a dur"),
    (HEAD + A + "[task.a.retry]\nattempts = 1.5\n", 6, "task.a.retry.attempts", "whole number"),
    (HEAD + 'log_limit = "1 TB"\n' + A, 3, "flow.log_limit", 'such as "512KB"'),
    (HEAD + "log_limit = 0\n" + A, 3, "flow.log_limit", "at least 1 byte"),
    (HEAD + "log_limit = true\n" + A, 3, "flow.log_limit", "not the boolean true"),
    (
        HEAD + '[task.a]\nkind = "human"\nform = { ok = "boolean" }\n',
        5,
        "task.a.form.ok",
        'the string \'boolean\' is not a field type: use one of "str", "bool"',
    ),
    (HEAD + '[task.a]\nkind = "human"\nform = ["ok"]\n', 5, "task.a.form", "must be a table"),
    (
        HEAD + '[task.a]\nkind = "human"\n[task.a.form]\n"o k" = "str"\n',
        6,
        'task.a.form."o k"',
        "'o k'",
    ),
    # names
    (HEAD + '[task."a b"]\ncommand = ["a"]\n', 3, 'task."a b"', "task name 'a b' is not allowed"),
    (HEAD + '[task.".."]\ncommand = ["a"]\n', 3, 'task.".."', "task name '..' is not allowed"),
    (HEAD + '[task."-x"]\ncommand = ["a"]\n', 3, "task.-x", "starting with a letter, digit"),
    (HEAD + '[task.""]\ncommand = ["a"]\n', 3, 'task.""', "must not be empty"),
    # placeholders
    (HEAD + '[task.a]\ncommand = ["a", "{flow.idd}"]\n', 4, "task.a.command", "{flow.idd}"),
    (HEAD + A + 'env = { X = "{nope}" }\n', 5, "task.a.env.X", "unknown placeholder {nope}"),
    (HEAD + A + 'cwd = "out/{task}"\n', 5, "task.a.cwd", "known: {flow.id}, {flow.name}"),
    (HEAD + '[task.a]\ncommand = ["echo", "{"]\n', 4, "task.a.command", "unmatched '{'"),
    # a nested flow file that is not there
    (HEAD + '[task.a]\nflow = "nowhere.toml"\n', 4, "task.a.flow", "no flow file at /"),
]


@pytest.mark.parametrize(("text", "line", "key", "says"), BAD)
def test_bad_input_names_file_line_and_key(
    tmp_path: Path, text: str, line: int | None, key: str | None, says: str
) -> None:
    """Each bad file is a FlowFileError whose message starts "file:line: key:" and says
    what is wrong; the same three are attributes."""
    error = refused(tmp_path, text)
    source = str(tmp_path / "bad.toml")
    assert (error.source, error.line, error.key) == (source, line, key)
    where = source if line is None else f"{source}:{line}"
    assert str(error).startswith(f"{where}: {key}: " if key else f"{where}: "), str(error)
    assert says in str(error)
    assert isinstance(error, ValueError)


def test_the_message_of_a_misspelt_dependency(tmp_path: Path) -> None:
    """The brief's example, word for word after the file name."""
    text = RELEASE.replace('depends_on = ["build"]\nretry', 'depends_on = ["biuld"]\nretry')
    text = text.replace('[task.etl]\nflow = "sub.toml"\ndepends_on = ["build"]\n', "")
    error = refused(tmp_path, text)
    assert str(error) == (
        f"{tmp_path / 'bad.toml'}:12: task.unit.depends_on: unknown task 'biuld' (tasks: "
        "build, unit, ui_check, upload, announce). Did you mean 'build'?"
    )


def test_a_nested_flows_own_error_names_its_file(tmp_path: Path) -> None:
    """An error inside a nested flow file names that file and its line."""
    write(tmp_path, "sub.toml", '[flow]\nname = "s"\n[task.x]\ncommand = ["x"]\ntimeout = "soon"\n')
    write(tmp_path, "main.toml", HEAD + '[task.a]\nflow = "sub.toml"\n')
    with pytest.raises(FlowFileError) as caught:
        load(tmp_path / "main.toml")
    assert str(caught.value).startswith(f"{tmp_path / 'sub.toml'}:5: task.x.timeout: ")


def test_a_nesting_cycle_names_the_files(tmp_path: Path) -> None:
    """a.toml -> b.toml -> a.toml is refused, naming the files in order; a file nested
    twice without a cycle is fine (and read once)."""
    write(tmp_path, "a.toml", '[flow]\nname = "a"\n[task.inner]\nflow = "sub/b.toml"\n')
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "b.toml", '[flow]\nname = "b"\n[task.back]\nflow = "../a.toml"\n')
    with pytest.raises(FlowFileError) as caught:
        load(tmp_path / "a.toml")
    b = tmp_path / "sub" / "b.toml"
    assert (caught.value.source, caught.value.line, caught.value.key) == (
        str(b),
        4,
        "task.back.flow",
    )
    assert (
        f"nested flows form a cycle: {tmp_path / 'a.toml'} -> {b} -> {tmp_path / 'a.toml'}"
        in str(caught.value)
    )
    write(tmp_path, "leaf.toml", SUB)
    twice = load(
        write(
            tmp_path,
            "two.toml",
            HEAD + '[task.p]\nflow = "leaf.toml"\n[task.q]\nflow = "leaf.toml"\n',
        )
    )
    assert twice.tasks["p"].flow is twice.tasks["q"].flow


def test_an_unreadable_file(tmp_path: Path) -> None:
    """A missing file or one that is not UTF-8 is a FlowFileError naming it."""
    with pytest.raises(FlowFileError, match="no flow file at"):
        load(tmp_path / "missing.toml")
    (tmp_path / "latin.toml").write_bytes(b'[flow]\nname = "caf\xe9"\n')
    with pytest.raises(FlowFileError, match="cannot be read"):
        load(tmp_path / "latin.toml")


def test_lines_are_found_in_headers_inline_tables_and_after_multiline_strings() -> None:
    """Lines are found past a multi-line string holding a look-alike key, in dotted and
    quoted keys, and keys inside inline tables take their table's line."""
    text = (
        HEAD
        + 'description = """\n[task.a]\ntimeout = 1\n"""\n'  # lines 3-6: not real keys
        + '[task.a]\ncommand = ["a"]\n'  # 7, 8
        + '[task."b"]\ncommand = ["b"]\nretry = { attempts = 0 }\n'  # 9-11
    )
    with pytest.raises(FlowFileError) as caught:
        loads(text, "x.toml")
    assert (caught.value.line, caught.value.key) == (11, "task.b.retry.attempts")
    dotted = HEAD + "[task]\na.command = [1]\n"
    with pytest.raises(FlowFileError) as caught:
        loads(dotted, "y.toml")
    assert str(caught.value).startswith("y.toml:4: task.a.command: item 0 must be a string")


def test_check_form() -> None:
    """Form data: real booleans, ints that are not booleans, floats from any finite
    number; optional fields may be left out; unknown and missing fields all listed."""
    task = TaskSpec(
        name="ui",
        kind="human",
        form={"approved": "bool", "notes": "str?", "count": "int", "score": "float?"},
    )
    assert check_form(task, {"approved": True, "count": 3, "score": 2}) == {
        "approved": True,
        "count": 3,
        "score": 2.0,
    }
    assert isinstance(check_form(task, {"approved": False, "count": 0, "score": 1})["score"], float)
    with pytest.raises(ValueError, match=r"not list") as caught:
        check_form(task, [1])
    with pytest.raises(ValueError, match="does not match its form") as caught:
        check_form(task, {"approved": 1, "count": True, "score": float("nan"), "note": "x"})
    message = str(caught.value)
    for problem in (
        "approved: expected a bool, got int 1",
        "count: expected a int, got bool True",
        "score: expected a float, got float nan",
        "note: unknown field (did you mean 'notes'?)",
        "Its fields: approved: bool, notes: str (optional), count: int, score: float (optional)",
    ):
        assert problem in message
    with pytest.raises(
        ValueError, match=r"approved: missing \(a bool is required\); count: missing"
    ):
        check_form(task, None)


def test_check_form_of_a_task_without_a_form() -> None:
    """A task without a form takes {} or None, and nothing else."""
    task = TaskSpec(name="ok", kind="human")
    assert check_form(task, None) == {} and check_form(task, {}) == {}
    with pytest.raises(ValueError, match=r"x: unknown field.*has no form"):
        check_form(task, {"x": 1})


def test_expand() -> None:
    """Placeholders are replaced; doubled braces are literal; an unknown one is named
    with the known ones; a lone brace is refused."""
    values = {"flow.id": "rel-42", "task.attempt": "2"}
    assert expand("{flow.id}/{task.attempt}", values) == "rel-42/2"
    assert expand("{{flow.id}} {{}} plain", values) == "{flow.id} {} plain"
    assert expand("{{{flow.id}}}", values) == "{rel-42}"
    with pytest.raises(
        ValueError,
        match=r"unknown placeholder \{task\.name\}.*known: \{flow\.id\}, \{task\.attempt\}",
    ):
        expand("x-{task.name}", values)
    with pytest.raises(ValueError, match="unmatched '}'"):
        expand("a}b", values)
    assert set(PLACEHOLDERS) == {"flow.id", "flow.name", "task.name", "task.attempt"}


def test_a_thousand_task_chain() -> None:
    """A chain 1,000 deep loads fast (no recursion), in order; closing it is a cycle
    found without recursion either."""
    lines = [HEAD, '[task.t0]\ncommand = ["true"]\n']
    for i in range(1, 1000):
        lines.append(f'[task.t{i}]\ncommand = ["true"]\ndepends_on = ["t{i - 1}"]\n')
    text = "".join(lines)
    started = time.perf_counter()
    spec = loads(text)
    assert time.perf_counter() - started < 2
    assert spec.order() == [f"t{i}" for i in range(1000)]
    assert spec.descendants("t0") == [f"t{i}" for i in range(1, 1000)]
    closed = text.replace(
        '[task.t0]\ncommand = ["true"]\n', '[task.t0]\ncommand = ["true"]\ndepends_on = ["t999"]\n'
    )
    with pytest.raises(FlowFileError) as caught:
        loads(closed)
    assert caught.value.key == "task.t0.depends_on"
    assert (
        "cycle: t0 -> t999 -> t998 -> " in str(caught.value)
        and str(caught.value).count("->") == 1000
    )


def test_a_random_dag_of_a_thousand_tasks() -> None:
    """1,000 tasks with random dependencies, written in shuffled order, load in well
    under 2 s; the order keeps every dependency first, descendants are exact."""
    rng = random.Random(18)
    deps = {
        f"n{i}": rng.sample([f"n{j}" for j in range(i)], min(i, rng.randint(0, 4)))
        for i in range(1000)
    }
    names = list(deps)
    rng.shuffle(names)
    text = (
        HEAD
        + "max_running = 16\n"
        + "".join(
            f'[task.{name}]\ncommand = ["true"]\ndepends_on = {json.dumps(deps[name])}\n'
            for name in names
        )
    )
    started = time.perf_counter()
    spec = loads(text)
    assert time.perf_counter() - started < 2
    position = {name: index for index, name in enumerate(spec.order())}
    assert sorted(position) == sorted(deps)
    assert all(position[need] < position[name] for name, needs in deps.items() for need in needs)
    below = {name for name in deps if "n0" in deps[name]}
    grown = True
    while grown:
        more = {name for name in deps if set(deps[name]) & below} - below
        grown = bool(more)
        below |= more
    assert set(spec.descendants("n0")) == below
    assert [n for n in spec.order() if n in below] == spec.descendants("n0")


def test_the_error_survives_pickling() -> None:
    """FlowFileError keeps its file, line and key across processes."""
    import pickle

    with pytest.raises(FlowFileError) as caught:
        loads(HEAD + A + "timeout = 0\n", "f.toml")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (copy.source, copy.line, copy.key) == ("f.toml", 5, "task.a.timeout")
    assert str(copy) == str(caught.value)


def test_the_reference_example_loads(tmp_path: Path) -> None:
    """The example at the top of docs/reference/flow-file.md is a valid flow file."""
    reference = Path(__file__).parents[2] / "docs" / "reference" / "flow-file.md"
    example = reference.read_text().split("```toml\n", 1)[1].split("```", 1)[0]
    write(tmp_path, "etl.toml", SUB)
    spec = load(write(tmp_path, "release.toml", example))
    assert spec.order() == ["build", "unit", "ui_check", "upload", "etl"]
    assert spec.tasks["etl"].flow is not None and spec.tasks["unit"].retry_delay == 10.0
