"""Acting on one run or on many: ``durable cancel|pause|resume|retry ID``, or ``--all``
with the `durable ls` filters.

The bulk form selects runs with the filters, says how many match, and acts only after a
yes on a terminal or ``--yes``; a run the action does not apply to is reported and the
rest go on.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

from durable.ops import Operations, OpsError

from .output import InputError, note, print_object, printable
from .runs import add_filters, filters, operations

Act = Callable[[Operations, str], Mapping[str, Any]]


def one_or_all(
    args: argparse.Namespace, act: Act, describe: Callable[[Mapping[str, Any]], str]
) -> int:
    """Act on the run given by ID, printing *describe* of the answer; or with --all, on
    every run the filters select (`run_bulk`)."""
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


#: What ``--all`` selects when no --status is given: the runs the action can apply to.
DEFAULT_STATUSES = {
    "cancel": ("queued", "running", "waiting", "blocked", "paused"),
    "pause": ("queued", "running", "waiting"),
    "resume": ("paused",),
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


class BulkReport:
    """The outcome of a bulk action, per run as it comes (table, jsonl, csv) or all at
    the end (json: ``{"action", "matched", "succeeded", "failed", "items"}``); each item
    is ``{"id", "ok", "error"}``."""

    def __init__(self, fmt: str, verb: str, matched: int) -> None:
        self.fmt = fmt
        self.verb = verb
        self.matched = matched
        self.items: list[dict[str, Any]] = []
        self.failed = 0
        self._csv = csv.writer(sys.stdout, lineterminator="\n")
        if fmt == "csv":
            self._csv.writerow(["id", "ok", "error"])

    def add(self, run_id: str, error: str | None) -> None:
        """Report one run: done (*error* None) or not, and why."""
        row = {"id": run_id, "ok": error is None, "error": error}
        self.items.append(row)
        self.failed += error is not None
        if self.fmt == "table":
            outcome = "ok" if error is None else f"failed: {error}"
            print(printable(f"{run_id:<32}  {outcome}"))
        elif self.fmt == "jsonl":
            print(json.dumps(row, separators=(",", ":")))
        elif self.fmt == "csv":
            self._csv.writerow([run_id, "true" if error is None else "false", error or ""])
        sys.stdout.flush()

    def finish(self) -> None:
        """The summary: in the json document, else a last line (stderr for jsonl/csv)."""
        done = len(self.items) - self.failed
        summary = {
            "action": self.verb,
            "matched": self.matched,
            "succeeded": done,
            "failed": self.failed,
        }
        if self.fmt == "json":
            print(json.dumps({**summary, "items": self.items}, indent=2))
            return
        past = {
            "cancel": "Cancelled",
            "pause": "Paused",
            "resume": "Resumed",
            "retry": "Retried",
        }[self.verb]
        text = f"{past} {done} of {runs(len(self.items))}"
        text += f"; {self.failed} could not be (see above)." if self.failed else "."
        if self.matched == 0:
            text = "No runs match."
        if self.fmt == "table":
            print(text)
        else:
            note(text)


def runs(count: int) -> str:
    """``1 run``, ``1,204 runs``."""
    return f"{count:,} run" + ("" if count == 1 else "s")
