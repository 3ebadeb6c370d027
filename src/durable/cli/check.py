"""`durable check MODULE...`: would the unfinished runs still replay on this code?

Run it before a deploy, with the new code importable: it replays each unfinished run's
recorded history against the workflows the modules register, executes nothing and
writes nothing, and names the runs the change would block.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from .common import add_db_option, import_modules, positive
from .output import Column, add_output_option, field, note, print_items
from .runs import operations

EXAMPLES = """\
examples:
  durable check myapp.workflows
  durable check myapp.billing myapp.shipping --db postgresql://app@db/app
  durable check jobs.py -o json

Exit codes: 0 when every unfinished run would replay, 1 when at least one would diverge
(a deploy would block it), 2 when a module cannot be imported.
"""


def verdict(result: Mapping[str, Any]) -> str:
    """``ok``, or ``would diverge at position N: <why>``; then, for a wait on a typed
    event whose schema the code changed, ``; <why>``."""
    changed = f"; {result['schema_changed']}" if result.get("schema_changed") else ""
    if result["ok"]:
        return "ok" + changed
    where = "" if result.get("position") is None else f" at position {result['position']}"
    return f"would diverge{where}: {result['message']}{changed}"


COLUMNS = (
    Column("RUN", 32, field("run_id")),
    Column("WORKFLOW", 40, field("workflow")),
    Column("STATUS", 9, field("status")),
    Column("VERSION", 24, lambda result: result.get("version") or "-"),
    Column("RESULT", 300, verdict),
)


def by_version(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """*results* grouped by the runs' code version (runs with none last), in the order
    they came within a version."""
    return sorted(results, key=lambda result: (result["version"] is None, result["version"] or ""))


def summary(results: list[dict[str, Any]]) -> list[str]:
    """The closing lines: the counts, per version when the runs have several, and the
    runs on each side of every `durable.patched` id met."""
    diverging = sum(not result["ok"] for result in results)
    lines = [f"{len(results)} checked: {diverging} would diverge."]
    changed = sum(bool(result.get("schema_changed")) for result in results)
    if changed:
        lines.append(
            f"{changed} wait(s) for a typed event whose schema this code changed: their "
            "payloads must fit the new schema (keep it compatible until they are answered)."
        )
    versions: dict[str | None, list[int]] = {}
    sides: dict[str, dict[str, int]] = {}
    for result in results:
        counts = versions.setdefault(result["version"], [0, 0])
        counts[0] += 1
        counts[1] += not result["ok"]
        for patch, side in result.get("patches", {}).items():
            tally = sides.setdefault(patch, {"old": 0, "new": 0})
            tally[side] += 1
    if len(versions) > 1:
        for version, (checked, bad) in versions.items():
            name = "no version" if version is None else f"version {version}"
            lines.append(f"  {name}: {checked} checked, {bad} would diverge.")
    for patch in sorted(sides):
        old, new = sides[patch]["old"], sides[patch]["new"]
        advice = (
            "its old branch can go (deprecate_patch)"
            if old == 0
            else "keep its old branch until they finish"
        )
        lines.append(
            f"patch {patch!r}: {old} run(s) on the old branch, {new} on the new: {advice}."
        )
    return lines


def add_command(commands: Any) -> None:
    """Add ``check`` to the subcommands of the `durable` parser."""
    check = commands.add_parser(
        "check",
        help="would unfinished runs replay on this code?",
        description="Import MODULEs (the code you are about to deploy), replay every\n"
        "unfinished run's history against it, and report the runs that would diverge.\n"
        "Nothing is executed or written.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "modules", nargs="+", metavar="MODULE", help="dotted module name or .py file"
    )
    check.add_argument(
        "--limit", type=positive, metavar="N", help="check at most N runs (default: all)"
    )
    add_db_option(check)
    add_output_option(check)
    check.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """`durable check`: exit 1 if any run would diverge, 2 if the code cannot import."""
    try:
        import_modules(args.modules)
    except Exception as error:
        print(f"durable: cannot import {' '.join(args.modules)}: {error}", file=sys.stderr)
        return 2
    with operations(args) as ops:
        results = by_version(ops.check(limit=args.limit))
    print_items({"items": results}, args.output, COLUMNS, empty="No unfinished runs to check.")
    if results:
        for line in summary(results):
            if args.output == "table":
                print(line)
            else:
                note(line)
    return 1 if any(not result["ok"] for result in results) else 0
