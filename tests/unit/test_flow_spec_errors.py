"""Flow files (issue 18): every bad input a clear FlowFileError naming the file, the line
and the key (docs/reference/flow-file.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable.errors import FlowFileError
from durable.flows.spec import FlowSpec, TaskSpec, check_placeholders, load, loads
from tests.unit._flow_spec_helpers import HEAD, RELEASE, SUB, A, write


def refused(directory: Path, text: str) -> FlowFileError:
    """The error loading *text* from a file bad.toml raises."""
    with pytest.raises(FlowFileError) as caught:
        load(write(directory, "bad.toml", text))
    return caught.value


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


def test_the_error_survives_pickling() -> None:
    """FlowFileError keeps its file, line and key across processes."""
    import pickle

    with pytest.raises(FlowFileError) as caught:
        loads(HEAD + A + "timeout = 0\n", "f.toml")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (copy.source, copy.line, copy.key) == ("f.toml", 5, "task.a.timeout")
    assert str(copy) == str(caught.value)
