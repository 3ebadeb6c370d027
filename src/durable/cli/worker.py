"""`durable worker`: import the modules that define workflows, then serve queues."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from typing import Any

from durable.core.run_options import check_version
from durable.errors import ConfigurationError
from durable.runtime.defaults import configure
from durable.runtime.host import VERSION_ENV
from durable.runtime.logs import JsonFormatter, RunFields, TextFormatter
from durable.runtime.worker import ASYNC_CONCURRENCY, Worker

from ._signals import StopSignals
from .common import add_db_option, import_modules

log = logging.getLogger("durable.cli")

WORKER_EXAMPLES = """\
examples:
  durable worker myapp.workflows
  durable worker myapp.billing myapp.shipping --db postgresql://app@db/app --concurrency 16
  durable worker jobs.py --queue emails --queue reports --lease 60
  durable worker myapp.workflows --version 2024-11-24.1 --only-version   # blue/green
  durable worker myapp.workflows --metrics-port 9464 --metrics-host 0.0.0.0   # Prometheus
  durable worker myapp.workflows --log-format json   # one JSON object per line
  DURABLE_DATABASE_URL=sqlite:///app.db python -m durable worker myapp.workflows

Stop with SIGTERM or Ctrl-C: running work is handed back at its next durable call (or
after --grace seconds) for another worker to continue. A second signal exits at once;
nothing is lost either way, the runs are taken over when their lease expires.
"""


def add_command(commands: Any) -> None:
    """Register ``durable worker``."""
    worker = commands.add_parser(
        "worker",
        help="claim and run queued workflows and tasks",
        description="Import MODULEs so their @workflow/@task functions register, then claim "
        "and execute queued runs until stopped.",
        epilog=WORKER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    worker.add_argument(
        "modules",
        nargs="*",
        metavar="MODULE",
        help="dotted module name or .py file (none: a worker for process flows only)",
    )
    add_db_option(worker)
    worker.add_argument(
        "--queue",
        action="append",
        dest="queues",
        metavar="NAME",
        help="queue to serve (repeatable; default: default)",
    )
    worker.add_argument(
        "--concurrency", type=int, default=8, help="sync runs at once, a thread each (default: 8)"
    )
    worker.add_argument(
        "--async-concurrency",
        type=int,
        default=ASYNC_CONCURRENCY,
        metavar="N",
        help="async runs at once on the worker's event loop; 0 runs them in threads "
        f"(default: {ASYNC_CONCURRENCY})",
    )
    worker.add_argument(
        "--warn-blocking",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="warn when one step of an async run holds the event loop longer (default: 0.5)",
    )
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
        "--version",
        type=_version,
        default=os.environ.get(VERSION_ENV) or None,
        metavar="V",
        help="the version of the code this worker runs: it stamps the runs it creates and "
        f"first starts (default: ${VERSION_ENV})",
    )
    worker.add_argument(
        "--only-version",
        action="store_true",
        help="claim only runs of --version and runs of no version: runs other versions "
        "created or started are left to their own workers (blue/green deploys)",
    )
    worker.add_argument(
        "--metrics-port",
        type=_port,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (needs durable[metrics])",
    )
    worker.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the metrics listen on (default: 127.0.0.1; 0.0.0.0 for any)",
    )
    worker.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default: INFO",
    )
    worker.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text lines, or one JSON object per line with the run fields (default: text)",
    )
    worker.set_defaults(handler=run_worker, parser=worker)


def _version(text: str) -> str:
    """A code version (argparse type): a non-empty string of at most 512 bytes."""
    try:
        return check_version(text)
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _port(text: str) -> int:
    """A TCP port (argparse type): 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give 0 to 65535")
    return port


def _serve_metrics(args: argparse.Namespace) -> Any:
    """The metrics server of ``--metrics-port``, bound before anything is claimed (None
    without the option); raises ConfigurationError if it cannot listen."""
    if args.metrics_port is None:
        return None
    from durable.ops import metrics

    server = metrics.serve(args.metrics_port, args.metrics_host)
    log.info("serving metrics at http://%s:%d/metrics", args.metrics_host, server.server_port)
    return server


def run_worker(args: argparse.Namespace) -> int:
    """`durable worker`: serve queues until SIGTERM or SIGINT."""
    if args.only_version and args.version is None:
        args.parser.print_usage(sys.stderr)
        print(
            "durable worker: error: --only-version claims only the runs of this worker's "
            f"code version: add --version V (or set ${VERSION_ENV}).",
            file=sys.stderr,
        )
        return 2
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if args.log_format == "json" else TextFormatter())
    handler.addFilter(RunFields())  # the application's own loggers' records too
    logging.basicConfig(level=args.log_level, handlers=[handler])
    try:
        import_modules(args.modules)
    except Exception as error:
        print(f"durable: cannot import {' '.join(args.modules)}: {error}", file=sys.stderr)
        return 2
    try:
        server = _serve_metrics(args)
    except ConfigurationError as error:
        print(f"durable worker: error: {error}", file=sys.stderr)
        return 2
    engine = configure(
        args.db,
        lease=args.lease,
        max_recoveries=args.max_recoveries,
        version=args.version,
        only_version=args.only_version,
    )
    if server is not None:
        from durable.ops import metrics

        metrics.instrument(engine)
    worker = Worker(
        engine,
        queues=args.queues or ["default"],
        concurrency=args.concurrency,
        async_concurrency=args.async_concurrency,
        grace=args.grace,
        warn_blocking=args.warn_blocking,
    )

    def exit_now(name: str) -> None:
        with contextlib.suppress(Exception):  # a handler may not be able to write now
            log.warning("second %s: exiting now", name)
        os._exit(130)

    stops = StopSignals(again=exit_now)
    worker.start()
    log.info("%s: stopping; send it again to exit at once", stops.wait())
    busy = worker.stop()
    engine.close()
    if server is not None:
        server.shutdown()
    if busy:
        # Their runs are handed back; the threads still in task bodies cannot be stopped,
        # and waiting for them could take forever. Exit now (nothing of theirs can be
        # recorded any more: the engine is closed and their runs have new epochs soon).
        log.info("exiting with %d task bodies still running; their runs were handed back", busy)
        logging.shutdown()
        os._exit(0)
    return 0
