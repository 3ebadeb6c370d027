"""Process flows through the engine and the `durable flow` command, in this process
(a worker on the test's database runs them): bad input (a malformed file, a missing
binary, a log without bound, verbs that do not apply), kill, nested flows and the
notification of a human task."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
import durable.flows
from durable.core.records import RunStatus
from durable.errors import FlowRefused, UnknownTask
from durable.flows.engine import encode, flow
from durable.flows.spec import load
from durable.runtime.defaults import swap
from tests.e2e.flow_ledger import until

from .cli_world import BOTH, Cli

#: messages the notification hook received (it runs in this process's worker).
NOTIFIED: list[dict[str, Any]] = []


def record(message: dict[str, Any]) -> None:
    """The notification hook of `test_a_human_task_notifies_its_assignee`."""
    NOTIFIED.append(message)


@pytest.fixture
def flows(url: str, tmp_path: Path) -> Iterator[durable.Engine]:
    before = os.environ.get("DURABLE_FLOW_DIR")
    os.environ["DURABLE_FLOW_DIR"] = str(tmp_path / "state")
    engine = durable.Engine(url, lease=10.0)
    previous = swap(engine)
    worker = durable.Worker(engine, concurrency=12, poll=0.02).start()
    try:
        yield engine
    finally:
        worker.stop(grace=5)
        swap(previous)
        engine.close()
        if before is None:
            del os.environ["DURABLE_FLOW_DIR"]
        else:
            os.environ["DURABLE_FLOW_DIR"] = before


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def tasks(engine: durable.Engine, flow_id: str) -> dict[str, dict[str, Any]]:
    view = durable.flows.view(flow_id, engine=engine)
    return {task["name"]: task for task in view["tasks"]}


@BOTH
def test_a_malformed_file_is_refused_naming_file_line_and_key(
    flows: durable.Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    path = write(tmp_path, "bad.toml", '[flow]\nname = "x"\n[task.a]\ncommand = ["true"]\n'
                 '[task.b]\ncommand = ["true"]\ndepends_on = ["c"]\n')  # fmt: skip
    result = Cli(capsys, url)("flow", "run", str(path), "--id", "bad-1")
    assert result.code == 2
    assert f"{path}:7: task.b.depends_on: unknown task 'c'" in result.err
    assert flows.backend.get_run("bad-1") is None  # nothing was started


@BOTH
def test_a_missing_binary_fails_its_task_and_the_rest_goes_on(
    flows: durable.Engine, tmp_path: Path
) -> None:
    path = write(tmp_path, "f.toml", '[flow]\nname = "missing"\n'
                 '[task.a]\ncommand = ["no-such-binary-18"]\n[task.b]\ncommand = ["true"]\n'
                 '[task.c]\ncommand = ["true"]\ndepends_on = ["a"]\n')  # fmt: skip
    durable.flows.start(path, id="missing-1", engine=flows)
    until(lambda: durable.flows.view("missing-1", engine=flows)["stuck"], "the flow to stop")
    found = tasks(flows, "missing-1")
    assert [found[n]["status"] for n in "abc"] == ["failed", "finished", "not_ready"]
    assert "command 'no-such-binary-18' not found" in found["a"]["error"]
    assert found["a"]["attempts"] == 1  # a missing binary is not retried


@BOTH
def test_a_log_without_bound_is_capped_with_a_note(flows: durable.Engine, tmp_path: Path) -> None:
    path = write(tmp_path, "f.toml", '[flow]\nname = "loud"\nlog_limit = "4KB"\n'
                 "[task.a]\ncommand = [\"sh\", \"-c\", \"head -c 200000 /dev/zero | tr '\\\\0' x; "
                 'echo; echo the end"]\n')  # fmt: skip
    durable.flows.start(path, id="loud-1", engine=flows).result(timeout=30)
    log = durable.flows.logs("loud-1", "a", engine=flows)
    assert log["log_bytes"] == 200_009 and log["log_dropped"] > 190_000
    assert "bytes dropped ...]" in log["log"] and log["log"].rstrip().endswith("the end")
    assert len(log["log"].encode()) < 4096 + 100


@BOTH
def test_kill_ends_a_running_command_and_restart_runs_it_again(
    flows: durable.Engine, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    path = write(tmp_path, "f.toml", '[flow]\nname = "slow"\n'
                 f'[task.a]\ncommand = ["sh", "-c", "test -e {go} || sleep 60"]\n'
                 '[task.b]\ncommand = ["true"]\ndepends_on = ["a"]\n')  # fmt: skip
    durable.flows.start(path, id="slow-1", engine=flows)
    until(lambda: tasks(flows, "slow-1")["a"]["pid"], "a to run")
    with pytest.raises(FlowRefused, match="not running"):
        durable.flows.kill("slow-1", "b", engine=flows)
    began = time.monotonic()
    assert durable.flows.kill("slow-1", "a", actor="me", engine=flows)["killed"]
    until(lambda: tasks(flows, "slow-1")["a"]["status"] == "killed", "a killed")
    assert time.monotonic() - began < 15  # within a heartbeat write and the grace
    assert durable.flows.view("slow-1", engine=flows)["stuck"]
    go.touch()
    durable.flows.restart("slow-1", "a", engine=flows)
    assert durable.get("slow-1").result(timeout=30)["counts"] == {"finished": 2}
    assert [a.action for a in flows.backend.actions("slow-1")] == ["flow.kill", "flow.restart"]


@BOTH
def test_a_kill_before_a_worker_takes_the_launch_ends_the_task_killed(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task is running from the moment its flow dispatches its launch; killed before
    a worker took the launch, the launch is cancelled without running any code, so the
    kill itself tells the flow (the task stayed running for good: a CI flake of
    tests/web/test_flow_api.py::test_kill_a_running_task). The flow runs on a queue of
    its own here, and no worker serves the launch's."""
    monkeypatch.setenv("DURABLE_FLOW_DIR", str(tmp_path / "state"))
    path = write(tmp_path, "f.toml", '[flow]\nname = "early"\n[task.a]\ncommand = ["sleep", "60"]\n'
                 '[task.b]\ncommand = ["true"]\ndepends_on = ["a"]\n')  # fmt: skip
    engine = durable.Engine(url, lease=10.0)
    worker = durable.Worker(engine, queues=("flows",), poll=0.02).start()
    try:
        engine.dispatch_call(flow.bind(encode(load(path))), run_id="early-1", queue="flows")
        until(lambda: tasks(engine, "early-1")["a"]["status"] == "running", "a to start")
        launch = tasks(engine, "early-1")["a"]["run_id"]
        assert durable.flows.kill("early-1", "a", actor="me", engine=engine)["killed"]
        until(lambda: tasks(engine, "early-1")["a"]["status"] == "killed", "a killed")
        found = tasks(engine, "early-1")
        assert found["a"]["attempts"] == 0 and found["b"]["status"] == "not_ready"
        assert durable.flows.view("early-1", engine=engine)["stuck"]
        run = engine.backend.get_run(launch)
        assert run is not None and run.status is RunStatus.CANCELLED and run.started_at is None
        assert not (tmp_path / "state").exists()  # nothing was launched
        assert [a.action for a in engine.backend.actions("early-1")] == ["flow.kill"]
    finally:
        worker.stop(grace=5)
        engine.close()


@BOTH
def test_killing_a_nested_flow_ends_its_task_killed(flows: durable.Engine, tmp_path: Path) -> None:
    """The nested flow is cancelled (and the command in it killed), and tells its
    parent, whose task ends killed."""
    write(tmp_path, "sub.toml", '[flow]\nname = "sub"\n[task.x]\ncommand = ["sleep", "60"]\n')
    path = write(tmp_path, "main.toml", '[flow]\nname = "main"\n[task.inner]\nflow = "sub.toml"\n'
                 '[task.after]\ncommand = ["true"]\ndepends_on = ["inner"]\n')  # fmt: skip
    durable.flows.start(path, id="nest-kill-1", engine=flows)
    until(lambda: tasks(flows, "nest-kill-1")["inner"]["run_id"], "the nested flow")
    inner = tasks(flows, "nest-kill-1")["inner"]["run_id"]
    until(lambda: tasks(flows, inner)["x"]["pid"], "x to run")
    node = tasks(flows, inner)["x"]["run_id"]
    began = time.monotonic()
    assert durable.flows.kill("nest-kill-1", "inner", engine=flows)["killed"]
    until(lambda: tasks(flows, "nest-kill-1")["inner"]["status"] == "killed", "inner killed")
    assert time.monotonic() - began < 15
    assert tasks(flows, "nest-kill-1")["after"]["status"] == "not_ready"
    until(lambda: durable.flows.view(inner, engine=flows)["status"] == "cancelled", "sub over")
    until(lambda: flows.backend.get_run(node).status is RunStatus.CANCELLED, "x's launch to end")


@BOTH
def test_a_nested_flow_runs_as_one_task_and_a_failure_inside_stops_its_parent(
    flows: durable.Engine, tmp_path: Path
) -> None:
    fix = tmp_path / "fixed"
    write(tmp_path, "sub.toml", '[flow]\nname = "sub"\n[task.x]\ncommand = ["true"]\n'
          f'[task.y]\ncommand = ["test", "-e", "{fix}"]\ndepends_on = ["x"]\n')  # fmt: skip
    path = write(tmp_path, "main.toml", '[flow]\nname = "main"\n'
                 '[task.prepare]\ncommand = ["true"]\n'
                 '[task.inner]\nflow = "sub.toml"\ndepends_on = ["prepare"]\n'
                 '[task.after]\ncommand = ["true"]\ndepends_on = ["inner"]\n')  # fmt: skip
    durable.flows.start(path, id="nest-1", engine=flows)
    until(lambda: durable.flows.view("nest-1", engine=flows)["stuck"], "the inner failure")
    inner = tasks(flows, "nest-1")["inner"]
    assert inner["kind"] == "flow" and inner["status"] == "failed"
    assert "failed: y" in inner["error"]
    sub = durable.flows.view(inner["run_id"], engine=flows)
    assert sub["name"] == "sub" and sub["parent"] == "nest-1" and sub["stuck"]
    fix.touch()
    durable.flows.restart(inner["run_id"], "y", engine=flows)  # fixed inside: goes on
    assert durable.get("nest-1").result(timeout=30)["counts"] == {"finished": 3}
    assert durable.flows.view(inner["run_id"], engine=flows)["status"] == "completed"


@BOTH
def test_a_human_task_notifies_its_assignee_and_refuses_bad_answers(
    flows: durable.Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    NOTIFIED.clear()
    go = tmp_path / "go"
    wait_for_go = f"while [ ! -e {go} ]; do sleep 0.05; done"
    path = write(tmp_path, "f.toml", '[flow]\nname = "human"\n'
                 f'notify = "{__name__}:record"\n'
                 f'[task.build]\ncommand = ["sh", "-c", "{wait_for_go}"]\n'
                 '[task.check]\nkind = "human"\nassignee = "qa@example.com"\n'
                 'form = { approved = "bool", notes = "str?" }\n'
                 'depends_on = ["build"]\n')  # fmt: skip
    durable.flows.start(path, id="human-1", engine=flows)
    cli = Cli(capsys, url)
    until(lambda: tasks(flows, "human-1")["build"]["status"] == "running", "build to run")
    early = cli("flow", "done", "human-1", "check", "--data", '{"approved": true}')
    assert early.code == 4 and "not waiting" in early.err and "waits for build" in early.err
    go.touch()
    until(lambda: NOTIFIED, "the notification")
    [message] = NOTIFIED
    assert message["assignee"] == "qa@example.com" and message["task"] == "check"
    assert message["link"].endswith("#/flows/human-1?task=check")
    bad = cli("flow", "done", "human-1", "check", "--data", '{"approved": "yes", "extra": 1}')
    assert bad.code == 2 and "approved" in bad.err and "extra" in bad.err
    assert cli("flow", "done", "human-1", "nope").code == 3
    assert cli("flow", "restart", "no-such-flow", "check").code == 3
    assert cli("flow", "kill", "human-1", "check").code == 4
    good = cli("flow", "done", "human-1", "check", "--data", '{"approved": true}', "--user", "qa")
    assert good.code == 0, good.err
    assert durable.get("human-1").result(timeout=30)["counts"] == {"finished": 2}
    status = cli("flow", "status", "human-1", "-o", "json").json()
    check = next(task for task in status["tasks"] if task["name"] == "check")
    assert check["data"] == {"approved": True} and check["by"] == "cli:qa"
    with pytest.raises(UnknownTask):
        durable.flows.logs("human-1", "nope", engine=flows)
    assert json.loads(cli("flow", "ls", "-o", "json").out)["items"][0]["id"] == "human-1"


@BOTH
def test_starting_an_instance_again_resumes_it_and_another_file_is_refused(
    flows: durable.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "again.toml", '[flow]\nname = "again"\n[task.a]\ncommand = ["true"]\n')
    first = durable.flows.start("again.toml", id="again-1", engine=flows)
    assert durable.flows.start("./again.toml", id="again-1", engine=flows).id == first.id
    first.result(timeout=30)
    write(tmp_path, "again.toml", '[flow]\nname = "again"\n[task.b]\ncommand = ["true"]\n')
    with pytest.raises(durable.IdempotencyConflict, match="another definition of the flow"):
        durable.flows.start("again.toml", id="again-1", engine=flows)
