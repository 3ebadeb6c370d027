"""Flow files (issue 18) read into frozen specs: the model a file becomes, its defaults,
durations and sizes, and the JSON round-trip (docs/reference/flow-file.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from durable.errors import FlowFileError
from durable.flows.spec import FlowSpec, TaskSpec, load, loads
from tests.unit._flow_spec_helpers import HEAD, RELEASE, SUB, A, write


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


def test_the_reference_example_loads(tmp_path: Path) -> None:
    """The example at the top of docs/reference/flow-file.md is a valid flow file."""
    reference = Path(__file__).parents[2] / "docs" / "reference" / "flow-file.md"
    example = reference.read_text().split("```toml\n", 1)[1].split("```", 1)[0]
    write(tmp_path, "etl.toml", SUB)
    spec = load(write(tmp_path, "release.toml", example))
    assert spec.order() == ["build", "unit", "ui_check", "upload", "etl"]
    assert spec.tasks["etl"].flow is not None and spec.tasks["unit"].retry_delay == 10.0
