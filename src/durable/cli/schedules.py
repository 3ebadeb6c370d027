"""`durable schedules` and `durable schedule pause|resume|rm|trigger ID`: the stored
schedules, and acting on one (docs/howto/schedules.md)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from .actions import register
from .common import add_db_option
from .output import Column, add_output_option, field, print_items, print_object, when
from .runs import operations

#: The fields of a Schedule view, in contract order: the csv header, whichever of
#: ``cron``/``timezone`` and ``every`` the schedules have (or none at all).
SCHEDULE_FIELDS = (
    "id",
    "workflow",
    "cron",
    "timezone",
    "every",
    "catch_up",
    "max_catch_up",
    "jitter",
    "overlap",
    "queue",
    "priority",
    "declared",
    "orphaned",
    "paused",
    "next_fire_at",
    "last_fire_at",
    "last_run",
    "created_at",
    "updated_at",
)

SCHEDULES_EXAMPLES = """\
examples:
  durable schedules
  durable schedules -o json | jq -r '.items[] | select(.paused) | .id'
  durable schedules --db postgresql://app@db/app -o csv > schedules.csv

WHEN is the cron expression and its time zone, or the interval (every 15m). NEXT is the
next tick, or "paused", or "orphaned" (declared by code that no longer declares it: it
fires no more). LAST is the last tick fired, LAST RUN the run it started and its status.
"""

SCHEDULE_EXAMPLES = """\
examples:
  durable schedule pause nightly-report
  durable schedule resume nightly-report        # from its next tick after now
  durable schedule trigger sync-c-42 --import myapp.jobs
  durable schedule rm sync-c-42 -o json

pause stops a schedule's ticks (the runs it started go on); resume fires it again from
its next tick after now, without catching up the ticks it skipped while paused. trigger
starts a run now, outside the ticks, with the schedule's arguments (its id ends in
-manual); the workflow must be registered here: durable imports the modules given with
--import, and the module the workflow's dotted name starts with. rm deletes the
schedule; the runs it started stay. A schedule declared with the code
(@workflow(schedule=...)) is stored again by the next worker that starts with that code.
"""


def interval(seconds: float) -> str:
    """An ``every`` interval as people write it: ``15m``, ``1h30m``, ``1d``, ``90.5s``."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    whole = int(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    return "".join(parts) or "0s"


def fires_on(schedule: Mapping[str, Any]) -> str:
    """WHEN: ``0 3 * * * Europe/Paris``, or ``every 15m``."""
    if schedule.get("every") is not None:
        return f"every {interval(schedule['every'])}"
    return f"{schedule.get('cron')} {schedule.get('timezone') or 'UTC'}"


def next_tick(schedule: Mapping[str, Any]) -> str:
    """NEXT: the next tick's time, or why there is none."""
    if schedule.get("orphaned"):
        return "orphaned"
    if schedule.get("paused"):
        return "paused"
    return when(schedule.get("next_fire_at"))


def last_run(schedule: Mapping[str, Any]) -> str:
    """LAST RUN: ``<id> (<status>)``; "gone" for a run no longer stored (purged)."""
    last = schedule.get("last_run")
    if not last:
        return "-"
    return f"{last['id']} ({last.get('status') or 'gone'})"


SCHEDULE_COLUMNS = (
    Column("ID", 32, field("id")),
    Column("WORKFLOW", 40, field("workflow")),
    Column("WHEN", 30, fires_on),
    Column("NEXT", 20, next_tick),
    Column("LAST", 20, field("last_fire_at", when)),
    Column("LAST RUN", 60, last_run),
)


def add_commands(commands: Any) -> None:
    """Add ``schedules`` and ``schedule pause|resume|rm|trigger`` to the parser."""
    listing: argparse.ArgumentParser = commands.add_parser(
        "schedules",
        help="list the schedules: when each fires next, its last tick and run",
        description="List the stored schedules, by id: when each fires, its next tick,\n"
        "its last tick and the run that tick started.",
        epilog=SCHEDULES_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_db_option(listing)
    add_output_option(listing)
    listing.set_defaults(handler=run_schedules)

    one: argparse.ArgumentParser = commands.add_parser(
        "schedule",
        help="pause, resume, delete or trigger a schedule",
        description="Pause, resume, delete (rm) or trigger one schedule.",
        epilog=SCHEDULE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = one.add_subparsers(dest="verb", required=True, metavar="ACTION")
    for verb, help, handler in (
        ("pause", "stop the schedule's ticks (its runs go on)", run_pause),
        ("resume", "fire a paused schedule again, from its next tick", run_resume),
        ("rm", "delete the schedule (its runs stay)", run_rm),
        ("trigger", "start a run of the schedule now; print its id", run_trigger),
    ):
        parser: argparse.ArgumentParser = verbs.add_parser(
            verb,
            help=help,
            description=help[0].upper() + help[1:] + ".",
            epilog=SCHEDULE_EXAMPLES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("schedule_id", metavar="ID", help="the schedule's id")
        if verb == "trigger":
            parser.add_argument(
                "--import",
                action="append",
                default=[],
                dest="imports",
                metavar="MODULE",
                help="import this module first, so the workflow registers (repeatable)",
            )
        add_db_option(parser)
        add_output_option(parser)
        parser.set_defaults(handler=handler)


def run_schedules(args: argparse.Namespace) -> int:
    """`durable schedules`: every schedule, by id."""
    with operations(args) as ops:
        answer = {"items": ops.list_schedules()}
    print_items(
        answer, args.output, SCHEDULE_COLUMNS, empty="No schedules.", fields=SCHEDULE_FIELDS
    )
    return 0


def run_pause(args: argparse.Namespace) -> int:
    """`durable schedule pause ID`."""
    with operations(args) as ops:
        schedule = ops.pause_schedule(args.schedule_id)
    print_object(schedule, args.output, lambda: f"Paused schedule {schedule['id']}.")
    return 0


def run_resume(args: argparse.Namespace) -> int:
    """`durable schedule resume ID`."""
    with operations(args) as ops:
        schedule = ops.resume_schedule(args.schedule_id)
    print_object(
        schedule,
        args.output,
        lambda: f"Resumed schedule {schedule['id']}; next tick {next_tick(schedule)}.",
    )
    return 0


def run_rm(args: argparse.Namespace) -> int:
    """`durable schedule rm ID`."""
    with operations(args) as ops:
        answer = ops.delete_schedule(args.schedule_id)
    print_object(
        answer,
        args.output,
        lambda: f"Deleted schedule {answer['deleted']}; the runs it started stay.",
    )
    return 0


def run_trigger(args: argparse.Namespace) -> int:
    """`durable schedule trigger ID`: import the workflow's code, then start a run."""
    with operations(args) as ops:
        workflow = ops.get_schedule(args.schedule_id)["workflow"]
        register(workflow, args.imports)
        answer = ops.trigger_schedule(args.schedule_id)
    print_object(answer, args.output, lambda: f"Started run {answer['run']}.")
    return 0
