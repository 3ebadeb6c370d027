"""`durable ls`, `show`, `history` and `stats`: reading runs, and the options every
command that talks to `durable.ops` shares (the database, the run filters)."""

from __future__ import annotations

import argparse
import datetime as dt
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from durable.backends import DEFAULT_URL
from durable.core.attributes import as_text
from durable.core.records import RunStatus
from durable.ops import Operations
from durable.runtime.engine import Engine

from .attributes import add_attr_option, attributes_of
from .common import add_db_option, positive
from .output import (
    Column,
    CommandError,
    add_output_option,
    compact,
    error_line,
    field,
    note,
    percent,
    print_items,
    print_object,
    run_text,
    seconds,
    table,
    when,
)
from .properties import changes, columns_with_state
from .purge import is_age, parse_age

STATUSES = [status.value for status in RunStatus]

#: The fields of a RunSummary, in contract order: the csv header even with no rows.
RUN_FIELDS = (
    "id",
    "workflow",
    "status",
    "queue",
    "priority",
    "parent_id",
    "origin",
    "created_at",
    "started_at",
    "finished_at",
    "duration",
    "deadline_at",
    "wake_at",
    "waiting_on",
    "cancel_requested",
    "pause_requested",
    "recoveries",
    "version",
    "attributes",
)

RUN_COLUMNS = (
    Column("ID", 32, field("id")),
    Column("WORKFLOW", 40, field("workflow")),
    Column("STATUS", 9, field("status")),
    Column("QUEUE", 12, field("queue")),
    Column("VERSION", 14, field("version")),
    Column("CREATED", 20, field("created_at", when)),
    Column("DURATION", 8, field("duration", seconds)),
    Column("WAITING ON", 30, field("waiting_on")),
    Column("ATTRIBUTES", 40, field("attributes", as_text)),
)


def _step_result(step: Mapping[str, Any], now: float | None = None) -> str:
    if step.get("status") == "running":
        parts = ["running"]
        if step.get("progress") is not None:
            parts.append(f"{step['progress'] * 100:.0f}%")
        started = _epoch(step.get("started_at"))
        if started is not None:  # elapsed by this host's clock: for reading, not judging
            parts.append(f"for {seconds(max(0.0, (now or time.time()) - started))}")
        if step.get("heartbeat_at"):
            parts.append(f"heartbeat {when(step['heartbeat_at'])}")
        return ", ".join(parts)
    if step.get("error"):
        return error_line(step["error"])
    if step.get("kind") == "event" and step.get("status") == "completed":
        # A consumed event shows its payload, null included; a timeout says so.
        if step.get("input") == {"timed_out": True}:
            return "timed out (WaitTimeout)"
        return compact(step.get("output"))
    if step.get("output") is not None:
        return compact(step["output"])
    if step.get("child_id"):
        return f"run {step['child_id']}"
    if step.get("wake_at"):
        return f"until {when(step['wake_at'])}"
    return "-"


def _epoch(moment: object) -> float | None:
    """An ISO time from `durable.ops` as epoch seconds (None if it is not one)."""
    if not isinstance(moment, str):
        return None
    try:
        return dt.datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


STEP_COLUMNS = (
    Column("POS", 5, field("position")),
    Column("KIND", 8, field("kind")),
    Column("NAME", 40, field("name")),
    Column("STATUS", 9, field("status")),
    Column("ATTEMPTS", 8, field("attempts")),
    Column("DURATION", 8, field("duration", seconds)),
    Column("RESULT", 60, _step_result),
)

STAT_COLUMNS = (
    Column("RUNS", 8, field("runs")),
    Column("COMPLETED", 9, field("completed")),
    Column("FAILED", 6, field("failed")),
    Column("SUCCESS", 7, field("success", percent)),
    Column("AVG", 8, field("avg_duration", seconds)),
    Column("P50", 8, field("p50_duration", seconds)),
    Column("P95", 8, field("p95_duration", seconds)),
    Column("FAILED 24H", 10, field("failures_24h")),
    Column("LAST FAILURE", 20, field("last_failure_at", when)),
)

LS_EXAMPLES = """\
examples:
  durable ls                                    # the 20 newest runs
  durable ls --status failed,dead,timed_out --since 24h
  durable ls --workflow myapp.flows.checkout --since 2026-11-21T08:00 -o json
  durable ls --parent 4f2a... --limit 100 -o csv > children.csv
  durable ls --version 2024-11-24.1 --status queued,running,waiting   # left to drain
  durable ls --attr customer=c-42 --attr region=eu       # runs holding both attributes
  durable ls --cursor <the cursor printed after the previous page>

Times (--since, --until) are ISO 8601 (UTC unless an offset is given) or an age, a number
and a unit (s, m, h, d, w), meaning that long ago: 30m, 2h, 7d.
"""

SHOW_EXAMPLES = """\
examples:
  durable show 4f2a9c0e1b7d4e55a0c3d9e8f7a6b5c4
  durable show order-o-1 -o json | jq .error.traceback
"""

HISTORY_EXAMPLES = """\
examples:
  durable history order-o-1
  durable history order-o-1 -o jsonl | jq 'select(.status == "failed")'
"""

STATS_EXAMPLES = """\
examples:
  durable stats                                 # every run in the database
  durable stats --since 7d --workflow myapp.flows.checkout
  durable stats --task myapp.flows.charge -o json
"""


def add_filters(parser: argparse.ArgumentParser) -> None:
    """The run filters of `durable ls`, also used by the bulk actions (`bulk`)."""
    parser.add_argument("--workflow", metavar="NAME", help="runs of this workflow")
    parser.add_argument(
        "--status",
        action="extend",
        type=_statuses,
        default=[],
        metavar="STATUS",
        help=f"runs in this status (repeatable, or comma-separated): {', '.join(STATUSES)}",
    )
    parser.add_argument("--queue", metavar="NAME", help="runs on this queue")
    parser.add_argument(
        "--version",
        metavar="V",
        help="runs stamped with this code version (configure(version=), worker --version)",
    )
    parser.add_argument(
        "--since", type=parse_time, metavar="TIME", help="created at or after: ISO 8601 or an age"
    )
    parser.add_argument(
        "--until", type=parse_time, metavar="TIME", help="created before: ISO 8601 or an age"
    )
    parser.add_argument("--parent", metavar="ID", help="children of this run")
    parser.add_argument(
        "--search", metavar="TEXT", help="runs whose id contains TEXT (case-sensitive)"
    )
    add_attr_option(parser)


def filters(args: argparse.Namespace) -> dict[str, Any]:
    """The filter options as keyword arguments of `Operations.list_runs`."""
    return {
        "workflow": args.workflow,
        "status": tuple(args.status),
        "queue": args.queue,
        "since": args.since,
        "until": args.until,
        "parent": args.parent,
        "search": args.search,
        "version": args.version,
        "attributes": attributes_of(args),
    }


def parse_time(text: str) -> float:
    """An ISO 8601 time (UTC unless it says otherwise) or an age (``2h``: two hours
    ago), as epoch seconds.

    Raises:
        argparse.ArgumentTypeError: *text* is neither.
    """
    try:
        age = parse_age(text)
    except argparse.ArgumentTypeError:
        if is_age(text):
            raise  # an age, but too long: say that, not "neither"
    else:
        return time.time() - age.total_seconds()
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither an ISO 8601 time (2026-11-21T08:00:00Z) nor an age (30m, 2h, 7d)."
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def _statuses(text: str) -> list[str]:
    chosen = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [status for status in chosen if status not in STATUSES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a run status: use {', '.join(STATUSES)}."
        )
    return chosen


@contextmanager
def operations(args: argparse.Namespace, *, create: bool = False) -> Iterator[Operations]:
    """`Operations` on the database of ``--db``, closed afterwards.

    Without *create*, a SQLite URL whose file does not exist is an error: opening it
    would make an empty database, and a typo would then look like "no runs".
    """
    url = args.db or DEFAULT_URL
    if not create and url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///").split("?", 1)[0])
        if not path.exists():
            raise CommandError(f"no database file at {path}; check --db or $DURABLE_DATABASE_URL.")
    with Engine(url) as engine:
        yield Operations(engine)


def _parser(
    commands: Any, name: str, help: str, description: str, examples: str
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help,
        description=description,
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def add_commands(commands: Any) -> None:
    """Add ``ls``, ``show``, ``history`` and ``stats`` to the `durable` parser."""
    ls = _parser(
        commands,
        "ls",
        "list runs, newest first",
        "List runs, newest first, a page at a time. Filters combine (all must hold).",
        LS_EXAMPLES,
    )
    add_filters(ls)
    ls.add_argument(
        "--limit", type=positive, default=20, metavar="N", help="runs per page (default: 20)"
    )
    ls.add_argument("--cursor", metavar="CURSOR", help="the next page after a previous ls")
    ls.set_defaults(handler=run_ls)

    show = _parser(
        commands,
        "show",
        "one run: status, input, outcome, what it waits on",
        "Show one run: its status, input, output or error (with traceback), timings, what\n"
        "it waits on, its children, the properties it published (state), and who acted\n"
        "on it.",
        SHOW_EXAMPLES,
    )
    show.add_argument("run_id", metavar="ID", help="the run's id")
    show.set_defaults(handler=run_show)

    history = _parser(
        commands,
        "history",
        "a run's recorded steps, one line per position",
        "List the steps a run recorded, one per position: tasks, child workflows, waits,\n"
        "events, sends, with attempts, duration and a preview of the output or error.\n"
        "For a run that publishes properties, STATE shows what changed at each step.",
        HISTORY_EXAMPLES,
    )
    history.add_argument("run_id", metavar="ID", help="the run's id")
    history.set_defaults(handler=run_history)

    stats = _parser(
        commands,
        "stats",
        "per workflow and task: runs, success %%, durations",
        "Per workflow and per task: runs, finished or not (finished calls, for tasks),\n"
        "how many completed and failed, success % of the finished ones, average and\n"
        "95th-percentile duration, failures in the last 24 hours. Counts runs created\n"
        "in the last 7 days unless --since says otherwise.",
        STATS_EXAMPLES,
    )
    stats.add_argument(
        "--since",
        type=parse_time,
        metavar="TIME",
        help="count runs created (tasks started) since: an age or ISO 8601 (default: 7d)",
    )
    stats.add_argument(
        "--workflow", metavar="NAME", help="only this workflow, and the tasks its runs called"
    )
    stats.add_argument("--task", metavar="NAME", help="only this task (no workflows)")
    stats.set_defaults(handler=run_stats)

    for parser in (ls, show, history, stats):
        add_db_option(parser)
        add_output_option(parser)


def run_ls(args: argparse.Namespace) -> int:
    """`durable ls`: one page of runs; the next page's cursor on stderr."""
    with operations(args) as ops:
        page = ops.list_runs(**filters(args), limit=args.limit, cursor=args.cursor)
    print_items(page, args.output, RUN_COLUMNS, empty="No runs match.", fields=RUN_FIELDS)
    if page.get("next_cursor") and args.output != "json":
        note(f"More runs: add --cursor {page['next_cursor']}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    """`durable show ID`: the RunDetail (and, in the table, the actions taken on it)."""
    with operations(args) as ops:
        run = ops.get_run(args.run_id)
        actions = ops.actions(args.run_id) if args.output == "table" else []
    print_object(run, args.output, lambda: run_text(run, actions))
    return 0


def run_history(args: argparse.Namespace) -> int:
    """`durable history ID`: the run's steps in position order."""
    with operations(args) as ops:
        steps = ops.history(args.run_id)
    columns: Sequence[Column] = STEP_COLUMNS
    rows: Sequence[Mapping[str, Any]] = steps
    if args.output == "table" and any(step.get("state") is not None for step in steps):
        columns, rows = columns_with_state(STEP_COLUMNS), changes(steps)
    answer = {"items": steps}
    print_items(answer, args.output, columns, items=rows, empty="No steps recorded yet.")
    return 0


def run_stats(args: argparse.Namespace) -> int:
    """`durable stats`: one table for workflows, one for tasks."""
    with operations(args) as ops:
        answer = ops.stats(since=args.since, workflow=args.workflow, task=args.task)
    # jsonl and csv mix both lists in one stream: "kind" says which a row belongs to.
    rows = [
        {"kind": kind, **stat}
        for kind, key in (("workflow", "workflows"), ("task", "tasks"))
        for stat in answer[key]
    ]
    if args.output != "table":
        print_items(answer, args.output, (), items=rows, fields=("kind", "name"))
        return 0
    blocks = []
    for header, key in (("WORKFLOW", "workflows"), ("TASK", "tasks")):
        if answer[key]:
            blocks.append(table(answer[key], (Column(header, 50, field("name")), *STAT_COLUMNS)))
    print(f"Since {when(answer.get('since'))}:\n")
    print("\n\n".join(blocks) if blocks else "No runs to count.")
    return 0
