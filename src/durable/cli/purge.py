"""`durable purge`: delete finished runs older than an age, in batches."""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from pathlib import Path
from typing import Any

from durable.backends import DEFAULT_URL
from durable.runtime.engine import Engine
from durable.runtime.purging import count_before, purge_before, purge_cutoff

from .common import add_db_option, positive

EXAMPLES = """\
examples:
  durable purge --older-than 7d --db postgresql://app@db/app
  durable purge --older-than 12h --yes            # no question asked (cron, scripts)
  durable purge --older-than 2w --batch 200       # smaller transactions

Ages: a number and a unit, s (seconds), m (minutes), h (hours), d (days) or w (weeks).
Deleted: runs that finished (completed, failed, cancelled, dead, timed_out or
continued) longer ago than the age, with their history and events. Kept: unfinished runs
(queued, running, waiting, blocked) however old, and every run above or below one
in its family: a live parent's children, and a live child's parents.
A deleted run's id can be used again.
"""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
#: The longest age, in seconds: what a timedelta holds (999,999,999 days), less a day.
_LONGEST = (dt.timedelta.max - dt.timedelta(days=1)).total_seconds()


def is_age(text: str) -> bool:
    """Whether *text* has the form of an age (a number and a unit), whatever its size."""
    return _AGE.fullmatch(text.strip().lower()) is not None


def parse_age(text: str) -> dt.timedelta:
    """``30s``, ``15m``, ``12h``, ``7d`` or ``2w`` as a timedelta.

    Raises:
        argparse.ArgumentTypeError: *text* is not a number followed by one unit.
    """
    match = _AGE.fullmatch(text.strip().lower())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age: write a number and a unit, like 30s, 15m, 12h, 7d or 2w."
        )
    seconds = float(match[1]) * _UNITS[match[2]]
    if not seconds <= _LONGEST:  # inf (a number past float's range) fails too
        raise argparse.ArgumentTypeError(
            f"{text!r} is too long an age: at most {_LONGEST // _UNITS['w']:.0f}w (the "
            "longest a timedelta can hold, back before year 1)."
        )
    return dt.timedelta(seconds=seconds)


def add_command(commands: Any) -> None:
    """Add ``purge`` to the subcommands of the `durable` parser."""
    purge = commands.add_parser(
        "purge",
        help="delete finished runs older than an age",
        description="Delete runs that finished longer ago than --older-than, with their\n"
        "history and events, a batch at a time, so that the tables do not grow without\n"
        "bound. Runs that live runs may need are kept.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    purge.add_argument(
        "--older-than",
        required=True,
        type=parse_age,
        metavar="AGE",
        help="how long ago a run must have finished: 30s, 15m, 12h, 7d, 2w",
    )
    add_db_option(purge)
    purge.add_argument(
        "--batch",
        type=positive,
        default=1000,
        metavar="N",
        help="runs deleted per transaction (default: 1000)",
    )
    purge.add_argument(
        "--yes", "-y", action="store_true", help="do not ask for confirmation on a terminal"
    )
    purge.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """`durable purge`: count, confirm on a terminal, delete, report."""
    url = args.db or DEFAULT_URL
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///").split("?", 1)[0])
        if not path.exists():
            # Opening it would create an empty database: almost surely a wrong path.
            print(f"durable: no database file at {path}; check --db.", file=sys.stderr)
            return 1
    age = _describe(args.older_than)
    with Engine(url) as engine:
        cutoff = purge_cutoff(engine.backend, args.older_than)
        matching = count_before(engine.backend, cutoff)
        if matching == 0:
            print(f"No runs finished more than {age} ago can be deleted.")
            return 0
        print(f"{_runs(matching)} finished more than {age} ago can be deleted.")
        if not args.yes and sys.stdin.isatty():
            try:
                answer = input("Delete them, with their history and events? [y/N] ")
            except (EOFError, KeyboardInterrupt):
                print()
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                print("Nothing deleted.")
                return 0
        deleted = purge_before(engine.backend, cutoff, batch=args.batch)
    print(f"Deleted {_runs(deleted)}.")
    return 0


def _runs(count: int) -> str:
    return f"{count:,} run" + ("" if count == 1 else "s")


def _describe(age: dt.timedelta) -> str:
    seconds = age.total_seconds()
    for unit, name in ((604800, "week"), (86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= unit and seconds % unit == 0:
            count = int(seconds // unit)
            return f"{count} {name}" + ("" if count == 1 else "s")
    return f"{seconds:g} second" + ("" if seconds == 1 else "s")
