"""`durable check`: which unfinished runs would the code in these modules block?"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import durable
from durable import RunStatus

from . import cli_app
from .cli_world import BOTH, Cli, settle, status

APP = "tests.integration.cli_app"


@pytest.fixture
def cli(engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    """Two waiting runs (sw-1 of `switchable`, ap-1 of `approval`) and a finished one."""
    durable.execute(cli_app.completes, 1, id="done-1")
    durable.dispatch(cli_app.approval, "o-1", id="ap-1")
    durable.dispatch(cli_app.switchable, id="sw-1")
    settle(
        engine,
        lambda: all(status(engine, r) is RunStatus.WAITING for r in ("ap-1", "sw-1")),
    )
    return Cli(capsys, url)


def verdicts(cli: Cli, fmt: str) -> tuple[int, dict[str, tuple[bool, int | None, str]]]:
    """Exit code and, per run id, (ok, position, message), read from *fmt* output."""
    result = cli("check", APP, "-o", fmt)
    if fmt == "json":
        items = json.loads(result.out)["items"]
    elif fmt == "jsonl":
        items = [json.loads(line) for line in result.out.splitlines()]
    else:
        items = list(csv.DictReader(io.StringIO(result.out)))
        for item in items:
            item["ok"] = item["ok"] == "true"
            item["position"] = int(item["position"]) if item["position"] else None
    return result.code, {i["run_id"]: (i["ok"], i["position"], i["message"]) for i in items}


@BOTH
@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])  # the table: the next test
def test_check_reports_runs_the_new_code_would_diverge_on(
    cli: Cli, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unchanged code: every unfinished run replays (exit 0). After a change that calls
    another task first, the run that recorded the old call would diverge at position 0
    (exit 1); the others stay ok. Finished runs are not checked."""
    code, found = verdicts(cli, fmt)
    assert code == 0
    assert set(found) == {"ap-1", "sw-1"}
    assert all(ok for ok, _, _ in found.values())

    monkeypatch.setattr(cli_app, "VARIANT", "b")
    code, found = verdicts(cli, fmt)
    assert code == 1
    ok, position, message = found["sw-1"]
    assert (ok, position) == (False, 0)
    assert "step_a" in message and "step_b" in message
    # Only inspected: nothing happened to the run, so the verdict says what would.
    assert message.startswith("would block on resuming with this code: ")
    assert "the run is blocked" not in message
    assert durable.get("sw-1").status() is not RunStatus.BLOCKED
    assert found["ap-1"][0] is True


@BOTH
def test_check_as_a_table(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table: one line per unfinished run, ok or where it would diverge, and a
    count at the end; stored runs are left as they were."""
    lines = cli("check", APP).out.splitlines()
    assert lines[0].split() == ["RUN", "WORKFLOW", "STATUS", "VERSION", "RESULT"]
    assert sorted(line.split()[0] for line in lines[1:3]) == ["ap-1", "sw-1"]
    assert all(line.split()[2:] == ["waiting", "-", "ok"] for line in lines[1:3])
    assert lines[3] == "2 checked: 0 would diverge."

    monkeypatch.setattr(cli_app, "VARIANT", "b")
    result = cli("check", APP)
    assert result.code == 1
    (diverging,) = [line for line in result.out.splitlines() if line.startswith("sw-1")]
    assert "would diverge at position 0: " in diverging
    assert result.out.splitlines()[-1] == "2 checked: 1 would diverge."
    assert status(durable.get_engine(), "sw-1") is RunStatus.WAITING


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_check_with_a_limit_and_with_nothing_to_check(
    engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--limit caps the runs checked; with no unfinished run, check says so (exit 0)."""
    cli = Cli(capsys, url)
    durable.execute(cli_app.completes, 1, id="done-1")
    nothing = cli("check", APP)
    assert (nothing.code, nothing.out) == (0, "No unfinished runs to check.\n")
    for n in range(3):
        durable.dispatch(cli_app.completes, n, id=f"q-{n}", queue="later")
    assert len(cli("check", APP, "--limit", "2", "-o", "json").json()["items"]) == 2


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("module", ["tests.integration.no_such_module", "missing.py"])
def test_check_exits_2_when_the_code_cannot_be_imported(
    engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str], module: str
) -> None:
    """A module that does not import is exit 2, before the database is read."""
    result = Cli(capsys, url)("check", module)
    assert result.code == 2
    assert result.err.startswith(f"durable: cannot import {module}")


@BOTH
def test_check_in_a_fresh_process_takes_a_python_file(
    engine: durable.Engine, url: str, tmp_path: Path
) -> None:
    """`python -m durable check jobs.py`: a run whose workflow the file does not define
    is reported as one this code could not resume (exit 1)."""
    durable.dispatch(cli_app.completes, 1, id="q-1", queue="later")
    script = tmp_path / "other_jobs.py"
    script.write_text(
        "from durable import workflow\n\n\n@workflow\ndef nightly() -> int:\n    return 1\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "durable", "check", str(script), "-o", "jsonl", "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    (item,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert (item["run_id"], item["ok"], item["position"]) == ("q-1", False, None)
    assert f"named '{APP}.completes' is registered" in item["message"]
    assert "1 checked: 1 would diverge." in result.stderr
