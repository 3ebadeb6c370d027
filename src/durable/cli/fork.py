"""`durable fork RUN_ID --from N`: a new run of the same call that starts from a copy of
the run's first N positions and runs the rest with the code imported here."""

from __future__ import annotations

import argparse
from typing import Any

from .actions import actor, add_user_option, register
from .common import add_db_option
from .output import add_output_option, print_object
from .runs import operations

FORK_EXAMPLES = """\
examples:
  durable fork order-o-1 --from 7 --import myapp.flows
  durable fork order-o-1 --from 0 --id order-o-1-again     # run everything again
  durable fork order-o-1 --from 3 -o json

A new run of the same call (workflow, arguments, queue, priority) is queued: the steps
of order-o-1 below position 7 that had finished are copied into its history, with their
outputs and errors, so a worker replays them and does not run them again; position 7 on
runs with the workers' code. order-o-1 is not changed; the new run names it as its
origin (`durable show`). Fail and fork: fix the code, deploy it, fork the failed run
from its failed step (`durable history` shows the positions).

--from goes from 0 to the position after the last step. It cannot be inside a parallel
group (positions started together), nor past the position where a cancellation reached
the run. The run's workflow must be registered here (the modules given with --import,
or its dotted name's module): its code is replayed against the copied steps first,
executing nothing, to find its parallel groups and check that it agrees with them.
"""


def add_command(commands: Any) -> None:
    """Add ``fork`` to the `durable` parser."""
    fork: argparse.ArgumentParser = commands.add_parser(
        "fork",
        help="start a new run from a position of a run's history",
        description="Start a new run from a position of a run's history.",
        epilog=FORK_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fork.add_argument("run_id", metavar="RUN_ID", help="the run to fork")
    fork.add_argument(
        "--from",
        dest="from_position",
        type=int,
        required=True,
        metavar="N",
        help="the first position the new run runs again (0: all of it)",
    )
    fork.add_argument("--id", metavar="NEW_ID", help="the new run's id (default: generated)")
    fork.add_argument(
        "--import",
        action="append",
        default=[],
        dest="imports",
        metavar="MODULE",
        help="import this module first, so the run's workflow registers (repeatable)",
    )
    add_db_option(fork)
    add_output_option(fork)
    add_user_option(fork)
    fork.set_defaults(handler=run_fork)


def run_fork(args: argparse.Namespace) -> int:
    """`durable fork RUN_ID --from N`: import the run's code, then fork it."""
    with operations(args) as ops:
        workflow = ops.get_run(args.run_id)["workflow"]  # NotFound for an unknown id
        register(workflow, args.imports)
        answer = ops.fork(args.run_id, args.from_position, id=args.id, actor=actor(args))
    run = answer["run"]
    print_object(
        answer,
        args.output,
        lambda: (
            f"Forked run {answer['origin']} from position {answer['from']}: new run "
            f"{run['id']} of {run['workflow']} on queue {run['queue']} ({run['status']})."
        ),
    )
    return 0
