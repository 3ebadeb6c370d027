"""The `durable` command line (also `python -m durable`): the parser and `main`.

Each command group lives in its own module and registers its subcommands: `worker`,
`runs` (ls, show, history, stats), `actions` (start, cancel, pause, resume, retry,
send; `bulk` acts on many runs), `fork`, `schedules` (schedules, schedule pause|resume|rm|
trigger), `queues`, `check`, `purge` and `ui`; `output` prints for all of them, `common`
holds shared options."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from durable.errors import DurableError, InvalidValue
from durable.ops import OpsError

from . import actions, check, flows, fork, purge, queues, runs, schedules, ui, worker
from .output import CommandError, printable

NEWLINE = "\n"

EXIT_CODES = """\
exit codes:
  0  done
  1  an error: the database cannot be used, a bulk action failed on some runs, durable
     check found runs that would diverge
  2  bad usage or input: unknown options, bad JSON, a module that does not import
  3  not found: no such run or schedule, or no such workflow registered (start, fork)
  4  conflict: the run's state does not allow it (cancel or pause a finished run,
     resume one that is neither paused nor cancelled, retry one that did not fail,
     send to a finished run), start --id names another call, fork --id names a run
     that exists, a schedule resumed is not paused, or one triggered runs a workflow
     not registered here

`durable COMMAND --help` describes each command, with examples.
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="durable",
        description="Durable workflows: run workers against a database; list, inspect, "
        "start, cancel, pause, resume, retry and fork runs; list and operate schedules; see how "
        "queues are used; check code against live runs; purge old ones.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    worker.add_command(commands)
    runs.add_commands(commands)
    actions.add_commands(commands)
    fork.add_command(commands)
    schedules.add_commands(commands)
    queues.add_commands(commands)
    flows.add_command(commands)
    check.add_command(commands)
    purge.add_command(commands)
    ui.add_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code.

    Exit codes: 0 ok; 1 a general or storage error; 2 bad usage or input; 3 not found;
    4 conflict (the run's or schedule's state does not allow the action). Errors go to stderr as
    ``durable: <message>``.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, or a usage error argparse has printed
        return stop.code if isinstance(stop.code, int) else 2
    try:
        code: int = args.handler(args)
    except (OpsError, CommandError) as error:
        print(f"durable: {printable(str(error), keep=NEWLINE)}", file=sys.stderr)
        return error.exit_code
    except InvalidValue as error:  # bad input, whoever refused it
        print(f"durable: {printable(str(error), keep=NEWLINE)}", file=sys.stderr)
        return 2
    except DurableError as error:
        print(f"durable: {printable(str(error), keep=NEWLINE)}", file=sys.stderr)
        return 1
    return code
