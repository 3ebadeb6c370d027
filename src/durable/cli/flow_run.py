"""`durable flow run FILE [--id ID]`: start (or resume) a flow instance and run it here,
printing each task's changes as they happen, until the flow completes (exit 0), is
stuck on a failed task (exit 1: restart it, then run again), or Ctrl-C (its commands
go on running; run the same command again to adopt them and go on).

The flow runs on a `durable.Worker` inside this process, serving the flow's queue;
other workers on the same database may take part."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from typing import Any

from durable import flows
from durable.errors import FlowFileError
from durable.runtime.engine import Engine
from durable.runtime.worker import Worker

from .common import DEFAULT_URL, add_db_option, positive
from .output import InputError, printable, seconds

#: seconds between two looks at the flow while it runs.
LOOK_EVERY = 0.25


def add_command(verbs: Any, examples: str) -> None:
    """Add ``flow run``."""
    parser: argparse.ArgumentParser = verbs.add_parser(
        "run",
        help="start (or resume) a flow instance from its file and run it here, live",
        description="Start (or resume) a flow instance and run it in this process, printing "
        "its progress, until it completes (exit 0) or a failed task blocks it (exit 1).",
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="the flow file (TOML)")
    parser.add_argument(
        "--id",
        metavar="ID",
        help="the instance's id (default: a new one); an existing instance's id resumes it",
    )
    parser.add_argument(
        "--concurrency", type=positive, default=None, metavar="N",
        help="worker threads here (default: the flow's max_running + 4, at least 8)",
    )  # fmt: skip
    parser.add_argument("--quiet", "-q", action="store_true", help="print only the outcome")
    add_db_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Start the flow, run a worker, print changes until it is over or stuck."""
    try:
        spec = flows.load(args.file)
    except FlowFileError as error:
        raise InputError(str(error)) from None
    except OSError as error:
        raise InputError(f"cannot read the flow file: {error}") from None
    slots = args.concurrency or max(8, (spec.max_running or 8) + 4)
    with Engine(args.db or DEFAULT_URL) as engine:
        handle = flows.start(spec, id=args.id, engine=engine)
        say = (lambda text: None) if args.quiet else _say
        say(f"flow {handle.id} ({spec.name}, {len(spec.tasks)} tasks) from {spec.source}")
        worker = Worker(engine, concurrency=slots, poll=0.2).start()
        try:
            return _watch(engine, handle.id, say)
        except KeyboardInterrupt:
            print(
                f"\nstopped; commands still running go on. `durable flow run {args.file} "
                f"--id {handle.id}` adopts them and goes on.",
                flush=True,
            )
            return 130
        finally:
            worker.stop(grace=1.0)


def _watch(engine: Engine, flow_id: str, say: Any) -> int:
    seen: dict[str, str] = {}
    while True:
        view = flows.view(flow_id, engine=engine)
        for task in view["tasks"]:
            if seen.get(task["name"]) != task["status"]:
                seen[task["name"]] = task["status"]
                line = _change(flow_id, task)
                if line:
                    say(line)
        if view["status"] == "completed":
            print(f"flow {flow_id} completed", flush=True)
            return 0
        if view["status"] in ("failed", "cancelled", "timed_out", "dead", "blocked"):
            print(f"flow {flow_id} {view['status']}", flush=True)
            return 1
        if view["stuck"]:
            failed = [t["name"] for t in view["tasks"] if t["status"] in ("failed", "killed")]
            print(
                f"flow {flow_id} is stuck: {', '.join(failed)} failed, and the tasks after "
                f"{'it' if len(failed) == 1 else 'them'} wait. See `durable flow logs "
                f"{flow_id} {failed[0]}`; `durable flow restart {flow_id} {failed[0]}` "
                "runs it again (then run this command again to watch).",
                flush=True,
            )
            return 1
        time.sleep(LOOK_EVERY)


def _change(flow_id: str, task: Mapping[str, Any]) -> str | None:
    name, status = task["name"], task["status"]
    if status == "not_ready":
        return None
    if status == "running":
        return f"{name} running" + (f" (pid {task['pid']})" if task.get("pid") else "")
    if status == "waiting":
        example = json.dumps(
            {field.rstrip("?"): _example(kind) for field, kind in task["form"].items()}
        )
        return (
            f"{name} waits for {task.get('assignee') or 'a person'}: durable flow done "
            f"{flow_id} {name} --data '{example}'"
        )
    if status in ("finished", "failed", "killed"):
        took = f" in {seconds(task['duration'])}" if task.get("duration") is not None else ""
        why = f": {task['error']}" if status != "finished" and task.get("error") else ""
        return f"{name} {status}{took}{why}"
    return f"{name} {status}"


def _example(kind: str) -> Any:
    return {"bool": True, "int": 0, "float": 0.0}.get(kind.rstrip("?"), "...")


def _say(text: str) -> None:
    print(time.strftime("%H:%M:%S ") + printable(text), flush=True)
