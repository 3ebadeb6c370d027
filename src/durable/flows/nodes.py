"""One launch of a command task: the node workflow, and the task that runs the command
in a process of its own, which outlives the engine (seed 001's fail-safe engine).

The node (``durable.flow.node``) is a child run of its flow. It calls the command task
once per attempt of the task's ``retry``, then sends the outcome to the flow. The
command task starts the command under a small wrapper in a directory fixed by the
node's id and the call's position (`settings.launch_dir`) and watches it, heartbeating
its pid, host and log tail. If the engine dies meanwhile, the command keeps running;
the engine that takes the node over makes the task's attempt again, which finds the
directory: a command still running is adopted (pid and start time match), one that
ended meanwhile is recorded from its exit file, and one that died with its machine is
failed (the node's retry may launch it again). Nothing is started twice.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import socket
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import durable
from durable.api.decorators import task, workflow
from durable.errors import Cancelled, RunFinished, RunNotFound

from . import processes
from .settings import COMMAND, EVENT, NODE, NOTIFY, ended, ended_key, launch_dir
from .spec import expand

log = logging.getLogger(__name__)

#: the command task's heartbeat: writes at most every third of it (pid, host, log
#: tail), and a kill or cancel reaches the command within that third.
HEARTBEAT = timedelta(seconds=6)
#: seconds between two looks at a running command: on Linux its end wakes the watcher
#: at once (a pidfd) and it looks every POLL_CAP to heartbeat; elsewhere it starts small
#: (a `true` is over in a few ms) and doubles up to the cap.
POLL_FIRST, POLL_CAP = 0.002, 0.25
#: a command is heartbeated for (its pid, host and log tail stored, a cancel seen)
#: once it has run this long: most commands of a build end sooner, and each first
#: heartbeat is a write.
QUIET = 0.5
#: seconds between SIGTERM and SIGKILL when a command is killed.
GRACE = 5.0
#: bytes of the log's tail carried by each heartbeat.
TAIL = 4096
#: the cap on a launch's stored output when its flow sets none.
LOG_LIMIT = 1_048_576


@task(
    name=COMMAND,
    heartbeat=HEARTBEAT,
    # Only crashes and takeovers retry it (the body reports a command's failure as its
    # outcome, never raises it): each retry adopts the same launch directory.
    retry=dict(attempts=1000, backoff="constant", initial=0.2),
)
def command(
    flow_id: str, flow_name: str, task_name: str, spec: dict[str, Any], *, attempt: int, token: str
) -> dict[str, Any]:
    """Run (or adopt) one attempt of a command task; return its outcome. The last
    attempt's outcome goes to the flow from here, before it is recorded: the flow goes
    on while the node writes it down (sent again after a crash, the event keeps its
    key, so the flow gets it once)."""
    info = durable.info()
    assert info is not None and info.position is not None
    directory = launch_dir(info.run_id, token, info.position)
    values = {
        "flow.id": flow_id,
        "flow.name": flow_name,
        "task.name": task_name,
        "task.attempt": str(attempt),
    }
    try:
        outcome = _attempt(directory, spec, values)
    except Cancelled:
        killed = {"status": "killed", "error": "killed", "attempts": attempt}
        _tell(flow_id, task_name, info.run_id, killed)
        raise
    last = attempt >= int(spec.get("attempts") or 1)
    if outcome["status"] != "failed" or outcome.get("not_found") or last:
        _tell(flow_id, task_name, info.run_id, brief(outcome, attempt))
    return outcome


def _attempt(directory: Path, spec: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """Launch the command in *directory*, or adopt what is there, and watch it end."""
    found = processes.find(directory)
    if found.state == "absent":
        earlier = durable.last_heartbeat()
        if isinstance(earlier, dict) and earlier.get("host") not in (None, socket.gethostname()):
            return _failed(
                f"the command was started on {earlier['host']} by an engine that died; it "
                f"cannot be adopted from {socket.gethostname()}, so it counts as lost"
            )
        try:
            found = _launch(directory, spec, values)
        except (FileNotFoundError, NotADirectoryError, PermissionError) as error:
            return _failed(str(error), not_found=isinstance(error, processes.CommandNotFound))
        except FileExistsError:
            found = processes.find(directory)
    return _watch(directory, found, spec.get("timeout"), int(spec.get("log_limit") or LOG_LIMIT))


def brief(outcome: dict[str, Any], attempts: int) -> dict[str, Any]:
    """A launch's outcome without its log: what the flow is told and the node returns."""
    short = {key: value for key, value in outcome.items() if key != "log"}
    short["attempts"] = attempts
    return short


def _tell(flow_id: str, task_name: str, run_id: str, outcome: dict[str, Any]) -> None:
    """Send a launch's outcome to its flow from the command task, keyed by the launch:
    sent again (a retried attempt after a crash), it is delivered once."""
    try:
        durable.send(flow_id, EVENT, ended(task_name, run_id, outcome), key=ended_key(run_id))
    except RunFinished:
        pass  # the flow ended (cancelled): nobody listens
    except RunNotFound:  # purged meanwhile, or a database that is not the flow's
        log.warning(
            "flow %s is gone: the end of %s (%s) reaches nobody", flow_id, task_name, run_id
        )


def _launch(directory: Path, spec: dict[str, Any], values: dict[str, str]) -> processes.Found:
    argv = [expand(arg, values) for arg in spec["argv"]]
    env = dict(os.environ)
    env.update({key: expand(value, values) for key, value in (spec.get("env") or {}).items()})
    env.update(
        DURABLE_FLOW_ID=values["flow.id"],
        DURABLE_FLOW_NAME=values["flow.name"],
        DURABLE_TASK=values["task.name"],
        DURABLE_TASK_ATTEMPT=values["task.attempt"],
        DURABLE_INPUT=json.dumps(spec.get("input") or {}),
    )
    cwd = spec.get("cwd")
    return processes.launch(
        directory,
        argv,
        env=env,
        cwd=expand(cwd, values) if cwd else None,
        shell=bool(spec.get("shell")),
    )


def _watch(
    directory: Path, found: processes.Found, timeout: float | None, log_limit: int
) -> dict[str, Any]:
    """Wait for the command in *directory* to end, heartbeating; kill it if the run is
    cancelled or the task's timeout passes."""
    started = found.started_at or time.time()
    beat = {"pid": found.pid, "host": found.host, "dir": str(directory)}
    here = found.host in (None, socket.gethostname())
    watch = processes.ExitWatch(found.pid if here else None)
    pause = POLL_CAP if watch.exact else POLL_FIRST
    timed_out = False
    try:
        while found.state == "running":
            if timeout is not None and not timed_out and time.time() - started > timeout:
                timed_out = True
                processes.kill(directory, GRACE)
            if watch.wait(pause):  # it ended: its exit file is there (or it was lost)
                pause = POLL_FIRST
            pause = min(pause * 2, POLL_CAP)
            found = processes.find(directory)
            if pause >= POLL_CAP:  # a long command: show its output's tail
                beat["log"] = processes.read_log(directory, TAIL)[0]
            if time.time() - started >= QUIET:
                durable.heartbeat(beat)
    except BaseException:  # Cancelled (a kill, or the run's cancel), LeaseLost, ...
        processes.kill(directory, GRACE)
        raise
    finally:
        watch.close()
    return _outcome(directory, found, timeout if timed_out else None, log_limit)


def _outcome(
    directory: Path, found: processes.Found, timed_out: float | None, log_limit: int
) -> dict[str, Any]:
    outcome = processes.outcome(directory, log_limit)
    if found.state == "lost":
        outcome.update(
            status="failed",
            error="the command's process ended without an exit code: it was killed with "
            "its process group, or its machine restarted",
        )
    elif timed_out is not None:
        outcome.update(status="failed", error=f"timed out after {timed_out:g}s: killed")
    elif outcome.get("killed"):
        outcome.update(status="killed", error="killed")
    elif outcome.get("exit_code") == 0:
        outcome.update(status="finished", error=None)
    else:
        outcome.update(status="failed", error=f"exit code {outcome.get('exit_code')}")
    outcome["timed_out"] = timed_out is not None
    return outcome


def _failed(error: str, *, not_found: bool = False) -> dict[str, Any]:
    return {"status": "failed", "exit_code": None, "error": error, "not_found": not_found}


@task(name=NOTIFY, retry=dict(attempts=3, backoff="exponential", initial=1.0))
def notify(hook: list[str] | str, message: dict[str, Any]) -> None:
    """Tell a human task's assignee it is theirs: call ``module:function`` with
    *message*, or run the command with it in ``DURABLE_*`` environment variables."""
    if isinstance(hook, str):
        module, _, name = hook.partition(":")
        function = getattr(importlib.import_module(module), name)
        function(message)
        return
    env = dict(os.environ)
    env.update({f"DURABLE_{key.upper()}": str(value) for key, value in message.items()})
    subprocess.run(hook, env=env, check=True, timeout=60, stdin=subprocess.DEVNULL)


@workflow(name=NODE)
def node(flow_id: str, flow_name: str, task_name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One launch of command task *task_name*: its attempts (the last tells the flow
    how it ended)."""
    attempts = int(spec.get("attempts") or 1)
    token = durable.uuid4().hex  # recorded: the same after a crash, unique across databases
    outcome: dict[str, Any] = {}
    attempt = 0
    try:
        for attempt in range(1, attempts + 1):
            if attempt > 1 and spec.get("retry_delay"):
                durable.wait(float(spec["retry_delay"]))
            outcome = command(flow_id, flow_name, task_name, spec, attempt=attempt, token=token)
            if outcome["status"] != "failed" or outcome.get("not_found"):
                break
    except Cancelled:  # between attempts (inside one, the command task told the flow)
        info = durable.info()
        assert info is not None
        killed = {"status": "killed", "error": "killed", "attempts": attempt}
        with contextlib.suppress(RunFinished, RunNotFound):  # recorded: sent once
            durable.send(flow_id, EVENT, ended(task_name, info.run_id, killed))
        raise
    return brief(outcome, attempt)  # the log stays in the command task's result (`logs`)
