"""The `durable` command line (also `python -m durable`): the parser, `main`, and the
`worker` command. The other commands live beside it: `_cli_runs` (ls, show, history,
stats), `_cli_actions` (start, cancel, retry, send), `_cli_check`, `_cli_purge` and
`_cli_ui`; `_cli_output` prints for all of them."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from durable.errors import DurableError
from durable.ops import OpsError
from durable.runtime.defaults import configure
from durable.runtime.worker import Worker

from . import actions as _cli_actions
from . import check as _cli_check
from . import purge as _cli_purge
from . import runs as _cli_runs
from . import ui as _cli_ui
from .common import add_db_option
from .output import CommandError

log = logging.getLogger("durable.cli")

WORKER_EXAMPLES = """\
examples:
  durable worker myapp.workflows
  durable worker myapp.billing myapp.shipping --db postgresql://app@db/app --concurrency 16
  durable worker jobs.py --queue emails --queue reports --lease 60
  DURABLE_DATABASE_URL=sqlite:///app.db python -m durable worker myapp.workflows

Stop with SIGTERM or Ctrl-C: running work is handed back at its next durable call (or
after --grace seconds) for another worker to continue. A second signal exits at once;
nothing is lost either way, the runs are taken over when their lease expires.
"""

EXIT_CODES = """\
exit codes:
  0  done
  1  an error: the database cannot be used, a bulk action failed on some runs, durable
     check found runs that would diverge
  2  bad usage or input: unknown options, bad JSON, a module that does not import
  3  not found: no such run, or no such workflow registered
  4  conflict: the run's state does not allow it (cancel a finished run, retry one
     that did not fail, send to a finished run), or start --id names another call

`durable COMMAND --help` describes each command, with examples.
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="durable",
        description="Durable workflows: run workers against a database; list, inspect, "
        "start, cancel and retry runs; check code against live runs; purge old ones.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    worker = commands.add_parser(
        "worker",
        help="claim and run queued workflows and tasks",
        description="Import MODULEs so their @workflow/@task functions register, then claim "
        "and execute queued runs until stopped.",
        epilog=WORKER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    worker.add_argument(
        "modules", nargs="+", metavar="MODULE", help="dotted module name or .py file"
    )
    add_db_option(worker)
    worker.add_argument(
        "--queue",
        action="append",
        dest="queues",
        metavar="NAME",
        help="queue to serve (repeatable; default: default)",
    )
    worker.add_argument("--concurrency", type=int, default=8, help="runs at once (default: 8)")
    worker.add_argument("--lease", type=float, default=30.0, help="lease in seconds (default: 30)")
    worker.add_argument(
        "--grace", type=float, default=30.0, help="seconds to wind down on a signal (default: 30)"
    )
    worker.add_argument(
        "--max-recoveries",
        type=int,
        default=10,
        help="owner deaths before a run is given up as dead (default: 10)",
    )
    worker.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default: INFO",
    )
    worker.set_defaults(handler=run_worker)
    _cli_runs.add_commands(commands)
    _cli_actions.add_commands(commands)
    _cli_check.add_command(commands)
    _cli_purge.add_command(commands)
    _cli_ui.add_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code.

    Exit codes: 0 ok; 1 a general or storage error; 2 bad usage or input; 3 not found;
    4 conflict (the run's state does not allow the action). Errors go to stderr as
    ``durable: <message>``.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, or a usage error argparse has printed
        return stop.code if isinstance(stop.code, int) else 2
    try:
        code: int = args.handler(args)
    except (OpsError, CommandError) as error:
        print(f"durable: {error}", file=sys.stderr)
        return error.exit_code
    except DurableError as error:
        print(f"durable: {error}", file=sys.stderr)
        return 1
    return code


def import_modules(names: Sequence[str]) -> None:
    """Import each module (dotted name, or path to a .py file) so its functions register."""
    sys.path.insert(0, os.getcwd())  # like `python -m`: the working directory is importable
    for name in names:
        if name.endswith(".py") or os.sep in name:
            path = Path(name).resolve()
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None or not path.exists():
                raise ModuleNotFoundError(f"No Python file at {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
        else:
            importlib.import_module(name)


def run_worker(args: argparse.Namespace) -> int:
    """`durable worker`: serve queues until SIGTERM or SIGINT."""
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        import_modules(args.modules)
    except Exception as error:
        print(f"durable: cannot import {' '.join(args.modules)}: {error}", file=sys.stderr)
        return 2
    engine = configure(args.db, lease=args.lease, max_recoveries=args.max_recoveries)
    worker = Worker(
        engine, queues=args.queues or ["default"], concurrency=args.concurrency, grace=args.grace
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            log.warning("second %s: exiting now", signal.Signals(signum).name)
            os._exit(130)
        log.info("%s: stopping; send it again to exit at once", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    worker.start()
    while not stop.wait(0.5):
        pass  # the main thread stays free to run signal handlers
    busy = worker.stop()
    engine.close()
    if busy:
        # Their runs are handed back; the threads still in task bodies cannot be stopped,
        # and waiting for them could take forever. Exit now (nothing of theirs can be
        # recorded any more: the engine is closed and their runs have new epochs soon).
        log.info("exiting with %d task bodies still running; their runs were handed back", busy)
        logging.shutdown()
        os._exit(0)
    return 0
