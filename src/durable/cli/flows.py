"""`durable flow ls|status|logs|restart|kill|done|stats`: process flows (seed 001) as
operators see them; `durable flow run` (starting and watching one) is `flow_run.py`.
See docs/concepts/flows.md."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from durable.ops._values import iso

from . import flow_run
from .actions import actor, add_user_option, parse_json
from .common import add_db_option
from .output import Column, add_output_option, field, print_items, print_object, seconds, when
from .runs import operations

EXAMPLES = """\
examples:
  durable flow run release.toml --id rel-42      # start (or resume) it; progress live
  durable flow ls
  durable flow status rel-42                     # each task: status, attempts, exit code
  durable flow logs rel-42 unit                  # a task's captured output
  durable flow restart rel-42 unit               # it, then everything downstream, again
  durable flow kill rel-42 unit                  # SIGTERM, then SIGKILL after 5 s
  durable flow done rel-42 ui_check --data '{"approved": true}'
  durable flow done rel-42 ui_check --failed --data '{"notes": "button missing"}'
  durable flow stats release                     # runs, success %, average time per task

A flow runs on any worker that has durable installed (durable worker, or the worker that
durable flow run starts in its own process). Its commands run in processes of their own:
stopping or killing the engine leaves them running, and the next engine on the machine
adopts them. The flow file's format: docs/reference/flow-file.md.
"""


def _when(moment: float | None) -> str:
    return when(iso(moment))


def _status(task: Mapping[str, Any]) -> str:
    status = str(task["status"])
    if task.get("status") == "waiting" and task.get("assignee"):
        return f"waiting ({task['assignee']})"
    return status


TASK_COLUMNS = (
    Column("TASK", 24, field("name")),
    Column("KIND", 7, field("kind")),
    Column("STATUS", 30, _status),
    Column("ATTEMPTS", 8, field("attempts")),
    Column("EXIT", 5, field("exit_code")),
    Column("STARTED", 20, field("started_at", _when)),
    Column("DURATION", 9, field("duration", seconds)),
    Column("EXPECTED", 9, field("expected", seconds)),
    Column("NOTE", 60, lambda task: str(task.get("error") or "")),
)
FLOW_COLUMNS = (
    Column("ID", 32, field("id")),
    Column("FLOW", 20, field("name")),
    Column("STATUS", 10, lambda f: "stuck" if f.get("stuck") else str(f["status"])),
    Column("TASKS", 50, lambda f: ", ".join(f"{k} {v}" for k, v in sorted(f["counts"].items()))),
    Column("CREATED", 20, field("created_at", _when)),
)
STATS_COLUMNS = (
    Column("TASK", 24, field("task")),
    Column("RUNS", 6, field("runs")),
    Column("SUCCESS", 8, lambda row: "-" if row["success"] is None else f"{row['success']:g}%"),
    Column("AVERAGE", 9, field("average", seconds)),
)


def add_command(commands: Any) -> None:
    """Add ``flow`` and its verbs to the parser."""
    flow: argparse.ArgumentParser = commands.add_parser(
        "flow",
        help="run and operate process flows of command-line and human tasks (a TOML file)",
        description="Run and operate process flows: DAGs of command-line and human tasks.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = flow.add_subparsers(dest="verb", required=True, metavar="ACTION")
    flow_run.add_command(verbs, EXAMPLES)
    for verb, help, handler, task in (
        ("ls", "list the flow instances, newest first", run_ls, False),
        ("status", "each task's status, attempts, exit code and duration", run_status, False),
        ("logs", "a task's captured output (so far, while it runs)", run_logs, True),
        ("restart", "run a task again, then everything downstream of it", run_restart, True),
        ("kill", "end a running task's command (SIGTERM, then SIGKILL)", run_kill, True),
        ("done", "answer a human task (finished, or --failed)", run_done, True),
    ):
        parser = _verb(verbs, verb, help)
        if verb != "ls":
            parser.add_argument("flow_id", metavar="FLOW", help="the flow instance's id")
        if task:
            parser.add_argument("task", metavar="TASK", help="the task's name in the flow file")
        if verb in ("restart", "kill", "done"):
            add_user_option(parser)
        if verb == "done":
            parser.add_argument(
                "--data", default="{}", metavar="JSON", help="the form's fields, a JSON object"
            )
            parser.add_argument(
                "--failed", action="store_true", help="the task failed (default: finished)"
            )
        if verb == "ls":
            parser.add_argument("--limit", type=int, default=50, metavar="N", help="at most N")
        parser.set_defaults(handler=handler)
    stats = _verb(verbs, "stats", "each command task's runs, success % and average time")
    stats.add_argument("name", metavar="NAME", help="the flow's name (its [flow] name)")
    stats.set_defaults(handler=run_stats)


def _verb(verbs: Any, verb: str, help: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = verbs.add_parser(
        verb,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_db_option(parser)
    add_output_option(parser)
    return parser


def run_ls(args: argparse.Namespace) -> int:
    """`durable flow ls`."""
    with operations(args) as ops:
        answer = ops.flows.list(limit=args.limit)
    print_items(answer, args.output, FLOW_COLUMNS, empty="No flows.")
    return 0


def run_status(args: argparse.Namespace) -> int:
    """`durable flow status FLOW`: the flow's line, then a row per task."""
    with operations(args) as ops:
        view = ops.flows.view(args.flow_id)
    if args.output != "table":
        print_items({"items": view["tasks"], **view}, args.output, TASK_COLUMNS)
        return 0
    state = "stuck: a failed task blocks the rest" if view["stuck"] else view["status"]
    print(f"flow {view['id']} ({view['name']}, {view['source']}): {state}")
    print_items({"items": view["tasks"]}, args.output, TASK_COLUMNS)
    return 0


def run_logs(args: argparse.Namespace) -> int:
    """`durable flow logs FLOW TASK`: the output, as the command wrote it."""
    with operations(args) as ops:
        answer = ops.flows.logs(args.flow_id, args.task)
    if args.output != "table":
        print_object(answer, args.output, lambda: "")
        return 0
    if answer["log_dropped"] and answer["running"]:
        print(f"[... {answer['log_dropped']} earlier bytes not shown ...]")
    print(answer["log"], end="" if answer["log"].endswith("\n") or not answer["log"] else "\n")
    return 0


def run_restart(args: argparse.Namespace) -> int:
    """`durable flow restart FLOW TASK`."""
    with operations(args) as ops:
        answer = ops.flows.restart(args.flow_id, args.task, actor=actor(args))
    again = answer["restarted"]
    print_object(
        answer,
        args.output,
        lambda: (
            f"Restarting {args.task}"
            + (f", then {', '.join(again[1:])}." if len(again) > 1 else ".")
        ),
    )
    return 0


def run_kill(args: argparse.Namespace) -> int:
    """`durable flow kill FLOW TASK`."""
    with operations(args) as ops:
        answer = ops.flows.kill(args.flow_id, args.task, actor=actor(args))
    print_object(answer, args.output, lambda: f"Killing {args.task}.")
    return 0


def run_done(args: argparse.Namespace) -> int:
    """`durable flow done FLOW TASK [--data JSON] [--failed]`."""
    data = parse_json(args.data, "--data", dict, '{"approved": true}')
    status = "failed" if args.failed else "finished"
    with operations(args) as ops:
        answer = ops.flows.done(args.flow_id, args.task, data, status=status, actor=actor(args))
    print_object(answer, args.output, lambda: f"Task {args.task} {status}.")
    return 0


def run_stats(args: argparse.Namespace) -> int:
    """`durable flow stats NAME`: per command task, across the flow's instances."""
    with operations(args) as ops:
        answer = ops.flows.history(args.name)
    rows = [{"task": task, **row} for task, row in sorted(answer["tasks"].items())]
    print_items({"items": rows}, args.output, STATS_COLUMNS, empty="No runs of that flow.")
    return 0
