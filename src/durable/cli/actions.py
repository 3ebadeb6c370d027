"""`durable start`, `cancel`, `retry` and `send`: acting on runs, one or many.

Every action is recorded on the run with its actor, ``cli:<user>``. The bulk forms
(``cancel --all``, ``retry --all``) select runs with the `durable ls` filters, say how
many match, and act only after a yes on a terminal or ``--yes``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from durable.ops import Operations, OpsError
from durable.runtime import registry as _registry

from .common import add_db_option, import_modules
from .output import BulkReport, InputError, add_output_option, note, print_object, runs
from .runs import add_filters, filters, operations

START_EXAMPLES = """\
examples:
  durable start myapp.flows.checkout --args '["o-1"]'
  durable start myapp.flows.report --kwargs '{"day": "2026-11-21"}' --queue reports
  durable start nightly --import myapp.jobs --id nightly-2026-11-21 --priority 5

The workflow must be registered in this process: durable imports the modules given with
--import, and for a dotted name like myapp.flows.checkout, its module (myapp.flows).
The run is queued for a worker (`durable worker`); start returns at once. Starting again
with the same --id and arguments returns the existing run.
"""

CANCEL_EXAMPLES = """\
examples:
  durable cancel order-o-1
  durable cancel --all --workflow myapp.flows.report --status queued
  durable cancel --all --since 1h --yes         # no question asked (scripts)

A queued or blocked run is cancelled at once (and its children). A running or waiting
one is asked to stop: it raises Cancelled at its next durable call in a worker, so its
finally blocks run. --all without --status selects the unfinished runs (queued, running,
waiting, blocked).
"""

RETRY_EXAMPLES = """\
examples:
  durable retry order-o-1
  durable retry --all --status failed --workflow myapp.flows.checkout --since 1h
  durable retry --all --since 24h --yes -o jsonl

A failed or dead run is queued again: the steps that completed are not run again, the
failed ones that ended it are. --all without --status selects failed and dead runs.
A timed_out run cannot be retried (its deadline has passed): start a new one.
"""

SEND_EXAMPLES = """\
examples:
  durable send order-o-1 approved --data '{"by": "ann"}'
  durable send order-o-1 approved --key approval-7   # sent at most once under this key
"""


def add_commands(commands: Any) -> None:
    """Add ``start``, ``cancel``, ``retry`` and ``send`` to the `durable` parser."""
    start = _parser(commands, "start", "queue a new run of a workflow", START_EXAMPLES)
    start.add_argument("workflow", metavar="WORKFLOW", help="the workflow's registered name")
    start.add_argument(
        "--args", default="[]", metavar="JSON", help="positional arguments, a JSON array"
    )
    start.add_argument(
        "--kwargs", default="{}", metavar="JSON", help="keyword arguments, a JSON object"
    )
    start.add_argument("--id", metavar="ID", help="the run's id (default: a random one)")
    start.add_argument("--queue", default="default", metavar="NAME", help="default: default")
    start.add_argument("--priority", type=int, default=0, metavar="N", help="higher runs first")
    start.add_argument(
        "--import",
        action="append",
        default=[],
        dest="imports",
        metavar="MODULE",
        help="import this module first, so its workflows register (repeatable)",
    )
    start.set_defaults(handler=run_start)

    cancel = _parser(commands, "cancel", "cancel a run, or every run that matches", CANCEL_EXAMPLES)
    add_bulk_options(cancel, "cancel")
    cancel.set_defaults(handler=run_cancel)

    retry = _parser(commands, "retry", "run a failed run again from its failure", RETRY_EXAMPLES)
    add_bulk_options(retry, "retry")
    retry.set_defaults(handler=run_retry)

    send = _parser(commands, "send", "send an event to a run", SEND_EXAMPLES)
    send.add_argument("run_id", metavar="ID", help="the run to send to")
    send.add_argument("event", metavar="EVENT", help="the event's name")
    send.add_argument("--data", default="null", metavar="JSON", help="the payload (JSON)")
    send.add_argument("--key", metavar="KEY", help="send at most once under this key")
    send.set_defaults(handler=run_send)

    for parser in (start, cancel, retry, send):
        add_db_option(parser)
        add_output_option(parser)
        add_user_option(parser)


def _parser(commands: Any, name: str, help: str, examples: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def add_user_option(parser: argparse.ArgumentParser) -> None:
    """``--user NAME``: who acts, recorded as ``cli:NAME``."""
    parser.add_argument(
        "--user",
        default=os.environ.get("USER") or os.environ.get("USERNAME") or "",
        metavar="NAME",
        help="who acts, recorded as cli:NAME (default: $USER)",
    )


def actor(args: argparse.Namespace) -> str:
    """The actor recorded on the run: ``cli:alice``, or ``cli`` when nobody is known."""
    return f"cli:{args.user}" if args.user else "cli"


def parse_json(text: str, option: str, kind: type, example: str) -> Any:
    """*text* decoded as JSON of *kind* (``object`` for any).

    Raises:
        InputError: it is not JSON, or not of *kind*; the message shows an example.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{option} is not valid JSON ({error}): write it like {option} '{example}'."
        ) from None
    except RecursionError:
        raise InputError(
            f"{option} is nested too deep for Python's JSON parser (arrays and objects "
            "hundreds of levels deep): flatten it."
        ) from None
    if not isinstance(value, kind):
        wanted = "array" if kind is list else "object" if kind is dict else "value"
        raise InputError(f"{option} must be a JSON {wanted}, like {option} '{example}'.")
    return value


def run_start(args: argparse.Namespace) -> int:
    """`durable start`: import the workflow's code, then queue a run of it."""
    positional = parse_json(args.args, "--args", list, '["o-1", 3]')
    keywords = parse_json(args.kwargs, "--kwargs", dict, '{"day": "2026-11-21"}')
    register(args.workflow, args.imports)
    with operations(args, create=True) as ops:
        run = ops.start(
            args.workflow,
            positional,
            keywords,
            id=args.id,
            queue=args.queue,
            priority=args.priority,
            actor=actor(args),
        )
    print_object(
        run,
        args.output,
        lambda: (
            f"Started run {run['id']} of {run['workflow']} on queue {run['queue']} "
            f"({run['status']})."
        ),
    )
    return 0


def register(workflow: str, imports: list[str]) -> None:
    """Import *imports*, then, until *workflow* is registered, the modules its dotted
    name starts with, longest first (``a.b.flow``: ``a.b``, then ``a``).

    Raises:
        InputError: a module given with --import, or one that exists under the name's
            prefix, fails to import.
    """
    try:
        import_modules(imports)
    except Exception as error:
        raise InputError(f"cannot import {' '.join(imports)}: {error}") from error
    parts = workflow.split(".")
    for end in range(len(parts) - 1, 0, -1):
        if _registry.find(workflow) is not None:
            return
        prefix = ".".join(parts[:end])
        try:
            importlib.import_module(prefix)
        except ModuleNotFoundError as error:
            missing = error.name or ""
            if prefix == missing or prefix.startswith(missing + "."):
                continue  # no such module: the name may be a class path, try shorter
            raise InputError(f"cannot import {prefix}: {error}") from error
        except Exception as error:
            raise InputError(f"cannot import {prefix}: {error}") from error


def run_cancel(args: argparse.Namespace) -> int:
    """`durable cancel ID` or `durable cancel --all ...`."""
    return _one_or_all(
        args,
        lambda ops, run_id: ops.cancel(run_id, actor=actor(args)),
        _cancelled,
    )


def run_retry(args: argparse.Namespace) -> int:
    """`durable retry ID` or `durable retry --all ...`."""
    return _one_or_all(
        args,
        lambda ops, run_id: ops.retry(run_id, actor=actor(args)),
        _retried,
    )


def run_send(args: argparse.Namespace) -> int:
    """`durable send ID EVENT`: deliver an event to the run's inbox."""
    data = parse_json(args.data, "--data", object, '{"by": "ann"}')
    with operations(args) as ops:
        answer = ops.send(args.run_id, args.event, data, sender=actor(args), key=args.key)
    event = answer["event"]
    print_object(
        answer,
        args.output,
        lambda: f"Sent event {event['name']!r} to run {event['run_id']} (event {event['id']}).",
    )
    return 0


Act = Callable[[Operations, str], Mapping[str, Any]]


def _one_or_all(
    args: argparse.Namespace, act: Act, describe: Callable[[Mapping[str, Any]], str]
) -> int:
    verb = args.command
    chosen = filters(args)
    if args.all:
        if args.run_id is not None:
            raise InputError(f"give a run ID or --all, not both: {verb} {args.run_id} --all.")
        return run_bulk(args, act, chosen)
    if args.run_id is None:
        raise InputError(
            f"give the ID of the run to {verb}, or --all with filters to {verb} many runs."
        )
    if any(chosen.values()):
        raise InputError(
            "the filters (--status, --workflow, --since...) select runs for --all: add --all, "
            f"or drop them to {verb} run {args.run_id} alone."
        )
    with operations(args) as ops:
        answer = act(ops, args.run_id)
    print_object(answer, args.output, lambda: describe(answer))
    return 0


def _cancelled(answer: Mapping[str, Any]) -> str:
    if answer["status"] == "cancelled":
        return f"Cancelled run {answer['id']}."
    return (
        f"Asked run {answer['id']} to cancel ({answer['status']}): it stops at its next "
        "durable call in a worker."
    )


def _retried(answer: Mapping[str, Any]) -> str:
    run = answer["run"]
    reopened = ", ".join(str(position) for position in answer["reopened"]) or "none"
    return f"Retried run {run['id']} ({run['status']}); reopened positions: {reopened}."


# -- bulk: --all with the ls filters ----------------------------------------------------

#: What ``--all`` selects when no --status is given: the runs the action can apply to.
DEFAULT_STATUSES = {
    "cancel": ("queued", "running", "waiting", "blocked"),
    "retry": ("failed", "dead"),
}

#: Runs fetched per page while collecting the ones to act on.
PAGE = 200


def add_bulk_options(parser: argparse.ArgumentParser, verb: str) -> None:
    """ID, or --all with the ls filters, and --yes."""
    parser.add_argument("run_id", nargs="?", metavar="ID", help=f"the run to {verb}")
    parser.add_argument(
        "--all",
        action="store_true",
        help=f"{verb} every run that matches the filters below (asks first)",
    )
    group = parser.add_argument_group("filters (with --all; as in durable ls)")
    add_filters(group)  # type: ignore[arg-type]
    parser.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="act without asking; needed with --all when stdin is not a terminal",
    )


def run_bulk(args: argparse.Namespace, act: Act, chosen: dict[str, Any]) -> int:
    """Count the matching runs, confirm, then act on each; a run that fails (say, it
    finished meanwhile) is reported and the rest go on. Exit 1 if any failed."""
    verb = args.command
    if not chosen["status"]:
        chosen["status"] = DEFAULT_STATUSES[verb]
    with operations(args) as ops:
        matching = ops.count_runs(**chosen)
        if matching == 0:
            BulkReport(args.output, verb, 0).finish()
            return 0
        note(f"{_match(matching)}.")
        if not args.yes and not _confirm(matching, verb):
            note("Nothing done.")
            return 0
        report = BulkReport(args.output, verb, matching)
        for run_id in _matching_ids(ops, chosen):
            try:
                act(ops, run_id)
            except OpsError as error:
                report.add(run_id, str(error))
            else:
                report.add(run_id, None)
    report.finish()
    return 1 if report.failed else 0


def _confirm(matching: int, verb: str) -> bool:
    """Ask on the terminal (on stderr, so stdout stays the output); refuse without one."""
    if not sys.stdin.isatty():
        raise InputError(
            f"{_match(matching)} and stdin is not a terminal, so nothing was done: "
            f"pass --yes to {verb} them without being asked."
        )
    sys.stderr.write("Proceed? [y/N] ")
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def _matching_ids(ops: Operations, chosen: dict[str, Any]) -> list[str]:
    """Every matching id, read before acting: acting changes statuses, and paging on
    through a list that shifts under the cursor could skip runs."""
    ids: list[str] = []
    cursor = None
    while True:
        page = ops.list_runs(**chosen, limit=PAGE, cursor=cursor)
        ids.extend(run["id"] for run in page["items"])
        cursor = page["next_cursor"]
        if not cursor:
            return ids


def _match(count: int) -> str:
    return f"{runs(count)} match" + ("es" if count == 1 else "")
