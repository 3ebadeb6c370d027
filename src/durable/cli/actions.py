"""`durable start`, `cancel`, `pause`, `resume`, `retry` and `send`: acting on runs,
one or many.

Every action is recorded on the run with its actor, ``cli:<user>``. The bulk forms
(``cancel --all``, ``pause --all``, ``resume --all``, ``retry --all``; see `bulk`)
select runs with the `durable ls` filters, say how many match, and act only after a
yes on a terminal or ``--yes``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
from collections.abc import Mapping
from typing import Any

from durable.runtime import registry as _registry

from .bulk import add_bulk_options, one_or_all
from .common import add_db_option, import_modules
from .output import InputError, add_output_option, print_object
from .runs import operations

START_EXAMPLES = """\
examples:
  durable start myapp.flows.checkout --args '["o-1"]'
  durable start myapp.flows.report --kwargs '{"day": "2026-11-21"}' --queue reports
  durable start nightly --import myapp.jobs --id nightly-2026-11-21 --priority 5
  durable start myapp.flows.checkout --args '["o-1"]' --attributes '{"customer": "c-42"}'

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

A queued or blocked run, or a paused one that never started, is cancelled at once (and
its children). A running, waiting or paused one is asked to stop: it raises Cancelled at
its next durable call in a worker, so its finally blocks run. --all without --status
selects the unfinished runs (queued, running, waiting, blocked, paused).
"""

PAUSE_EXAMPLES = """\
examples:
  durable pause order-o-1
  durable pause --all --workflow myapp.flows.report --yes

A queued or waiting run is paused at once, with its unfinished children; a running one
stops at its next durable call in a worker (the task in flight finishes first; `durable
show` says "pause requested" until then). A paused run holds no worker and is never
picked up; a timer that comes due or an event that arrives meanwhile takes effect once
it is resumed. A finished or blocked run, or one being cancelled, cannot be paused.
--all without --status selects the queued, running and waiting runs.
"""

RESUME_EXAMPLES = """\
examples:
  durable resume order-o-1
  durable resume --all --workflow myapp.flows.report --yes
  durable resume order-o-2        # a cancelled run: it goes on as if never cancelled

A paused run (and the paused runs below it) is queued again: it replays to where it
stopped and goes on. A running run asked to pause is let go on. A cancelled run goes on
from where the cancellation reached its code (its children cancelled with it first).
Other runs cannot be resumed: retry a failed one; a timed_out one's deadline has passed,
start a new one. --all without --status selects the paused runs.
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
    """Add ``start``, ``cancel``, ``pause``, ``resume``, ``retry`` and ``send`` to the
    `durable` parser."""
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
        "--attributes",
        metavar="JSON",
        help='what the run is searched by, a JSON object: {"customer": "c-42", "vip": true}',
    )
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

    pause = _parser(commands, "pause", "pause a run, or every run that matches", PAUSE_EXAMPLES)
    add_bulk_options(pause, "pause")
    pause.set_defaults(handler=run_pause)

    resume = _parser(commands, "resume", "resume a paused or cancelled run", RESUME_EXAMPLES)
    add_bulk_options(resume, "resume")
    resume.set_defaults(handler=run_resume)

    retry = _parser(commands, "retry", "run a failed run again from its failure", RETRY_EXAMPLES)
    add_bulk_options(retry, "retry")
    retry.set_defaults(handler=run_retry)

    send = _parser(commands, "send", "send an event to a run", SEND_EXAMPLES)
    send.add_argument("run_id", metavar="ID", help="the run to send to")
    send.add_argument("event", metavar="EVENT", help="the event's name")
    send.add_argument("--data", default="null", metavar="JSON", help="the payload (JSON)")
    send.add_argument("--key", metavar="KEY", help="send at most once under this key")
    send.set_defaults(handler=run_send)

    for parser in (start, cancel, pause, resume, retry, send):
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
    attributes = None
    if args.attributes is not None:
        attributes = parse_json(args.attributes, "--attributes", dict, '{"customer": "c-42"}')
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
            attributes=attributes,
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
    return one_or_all(
        args,
        lambda ops, run_id: ops.cancel(run_id, actor=actor(args)),
        _cancelled,
    )


def run_pause(args: argparse.Namespace) -> int:
    """`durable pause ID` or `durable pause --all ...`."""
    return one_or_all(
        args,
        lambda ops, run_id: ops.pause(run_id, actor=actor(args)),
        _paused,
    )


def run_resume(args: argparse.Namespace) -> int:
    """`durable resume ID` or `durable resume --all ...`."""
    return one_or_all(
        args,
        lambda ops, run_id: ops.resume(run_id, actor=actor(args)),
        _resumed,
    )


def run_retry(args: argparse.Namespace) -> int:
    """`durable retry ID` or `durable retry --all ...`."""
    return one_or_all(
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


def _cancelled(answer: Mapping[str, Any]) -> str:
    if answer["status"] == "cancelled":
        return f"Cancelled run {answer['id']}."
    return (
        f"Asked run {answer['id']} to cancel ({answer['status']}): it stops at its next "
        "durable call in a worker."
    )


def _paused(answer: Mapping[str, Any]) -> str:
    if answer["status"] == "paused":
        return f"Paused run {answer['id']}."
    return (
        f"Asked run {answer['id']} to pause ({answer['status']}): it stops at its next "
        "durable call in a worker."
    )


def _resumed(answer: Mapping[str, Any]) -> str:
    if answer["status"] == "running":  # it was only asked to pause: the request is withdrawn
        return f"Resumed run {answer['id']} (running): it goes on without pausing."
    return f"Resumed run {answer['id']} ({answer['status']})."


def _retried(answer: Mapping[str, Any]) -> str:
    run = answer["run"]
    reopened = ", ".join(str(position) for position in answer["reopened"]) or "none"
    return f"Retried run {run['id']} ({run['status']}); reopened positions: {reopened}."
