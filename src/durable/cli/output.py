"""How `durable` commands print: a table for people; json, jsonl or csv for programs.

The machine formats carry the shapes of `durable.ops` unchanged (json: the whole
answer; jsonl: one item per line; csv: one item per row, nested values as JSON text),
so a script reads the same fields from the CLI as from the REST API. The table is for
eyes only: fixed columns, long cells cut with "…", times in UTC to the second.
Besides the generic list and object printers, two shapes have their own: one run in
full (`run_text`, for `durable show`) and the results of a bulk action (`BulkReport`).

Whatever people read (tables, texts, bulk lines, ``durable: <error>``) passes
`printable`: stored text comes from API clients, and a raw escape sequence in an id
could clear the operator's screen or plant a fake hyperlink.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from durable.core.attributes import as_text
from durable.core.records import RunStatus

FORMATS = ("table", "json", "jsonl", "csv")

#: What a terminal would act on or cannot print: C0 controls, DEL, C1 controls (CSI,
#: OSC...), bidirectional overrides and isolates, lone surrogates.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

Row = Mapping[str, Any]


class CommandError(Exception):
    """A command cannot go on: `main` prints ``durable: <message>`` and exits with
    *exit_code* (1 unless a subclass says otherwise)."""

    exit_code = 1


class InputError(CommandError):
    """Input the user can fix (bad JSON, options that do not go together): exit code 2;
    the message says what is wrong and how to write it."""

    exit_code = 2


def add_output_option(parser: argparse.ArgumentParser) -> None:
    """``--output/-o``: the format of what goes to stdout."""
    parser.add_argument(
        "--output",
        "-o",
        choices=FORMATS,
        default="table",
        help="table (default, for people), json, jsonl (one object a line) or csv",
    )


@dataclass(frozen=True)
class Column:
    """One table column: its header, its widest cell, and how a row shows in it."""

    header: str
    width: int
    show: Callable[[Row], str]


def field(key: str, render: Callable[[Any], str] | None = None) -> Callable[[Row], str]:
    """A cell showing ``row[key]``: through *render* when given, "-" for null."""

    def show(row: Row) -> str:
        value = row.get(key)
        if value is None:
            return "-"
        return render(value) if render is not None else str(value)

    return show


def when(value: str | None) -> str:
    """An ISO time from `durable.ops` cut to the second: ``2026-11-21T10:00:00Z``."""
    if not value:
        return "-"
    return value[:19] + "Z" if len(value) >= 19 else value


def seconds(value: float | None) -> str:
    """A duration people read at a glance: ``0.042s``, ``12.5s``, ``3m07s``, ``2h05m``."""
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.3f}s"
    if value < 60:
        return f"{value:.1f}s"
    whole = int(value)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def percent(value: float | None) -> str:
    """A success rate: ``99.5%``, or "-" when nothing finished."""
    return "-" if value is None else f"{value:.1f}%"


def compact(value: Any) -> str:
    """A value as one line of JSON (strings as they are)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def error_line(error: Mapping[str, Any] | None) -> str:
    """An `Error` as ``ClassName: message``."""
    if not error:
        return "-"
    kind = str(error.get("type") or "Error").rsplit(".", 1)[-1]
    message = error.get("message")
    return f"{kind}: {message}" if message else kind


def printable(text: str, keep: str = "") -> str:
    """*text* with every control character written as its Python escape (``\\x1b``,
    ``\\u202e``), except those in *keep* (``"\\n"`` for multi-line text)."""
    if text.isprintable():
        return text
    return _CONTROLS.sub(lambda m: m[0] if m[0] in keep else _escaped(m[0]), text)


def _escaped(char: str) -> str:
    return char.encode("unicode_escape", "backslashreplace").decode("ascii")


def cut(text: str, width: int) -> str:
    """*text* on one line, escaped (`printable`), at most *width* characters, "…"
    marking a cut."""
    flat = printable(text, keep="\n\t")
    flat = " ".join(flat.split()) if any(c in flat for c in "\n\t") else flat
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def table(rows: Sequence[Row], columns: Sequence[Column]) -> str:
    """Rows under a header line, each column as wide as its widest cell (capped)."""
    cells = [[cut(column.show(row), column.width) for column in columns] for row in rows]
    widths = [
        max([len(column.header), *(len(line[i]) for line in cells)])
        for i, column in enumerate(columns)
    ]
    lines = []
    for line in [[column.header for column in columns], *cells]:
        padded = [text.ljust(width) for text, width in zip(line, widths, strict=True)]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def pairs(items: Iterable[tuple[str, str]]) -> str:
    """A key/value block: keys in a column, values after them (multi-line values are
    indented under their key)."""
    items = list(items)
    width = max((len(key) for key, _ in items), default=0)
    lines = []
    for key, value in items:
        first, *rest = value.splitlines() or [""]
        lines.append(f"{key.ljust(width)}  {first}".rstrip())
        lines.extend(f"{' ' * (width + 2)}{line}".rstrip() for line in rest)
    return "\n".join(lines)


def print_items(
    answer: Mapping[str, Any],
    fmt: str,
    columns: Sequence[Column],
    *,
    items: Sequence[Row] | None = None,
    empty: str = "Nothing to show.",
    fields: Sequence[str] = (),
    out: TextIO | None = None,
) -> None:
    """Print a list answer: *answer* whole as json, its ``items`` (or *items*) one per
    line as jsonl, one per row as csv (*fields* head an empty csv), or as a table of
    *columns* (*empty* when there are no rows)."""
    out = out or sys.stdout
    rows = list(answer["items"] if items is None else items)
    if fmt == "json":
        print(json.dumps(answer, indent=2, ensure_ascii=False, default=str), file=out)
    elif fmt == "jsonl":
        for row in rows:
            print(_jsonl(row), file=out)
    elif fmt == "csv":
        write_csv(rows, out, fields)
    elif rows:
        print(table(rows, columns), file=out)  # table() escapes every cell
    else:
        print(empty, file=out)


def print_object(answer: Mapping[str, Any], fmt: str, text: Callable[[], str]) -> None:
    """Print one object: as json, as one jsonl line, as a csv row, or as *text()*."""
    if fmt == "json":
        print(json.dumps(answer, indent=2, ensure_ascii=False, default=str))
    elif fmt == "jsonl":
        print(_jsonl(answer))
    elif fmt == "csv":
        write_csv([answer], sys.stdout)
    else:
        print(printable(text(), keep="\n"))


def write_csv(rows: Sequence[Row], out: TextIO, fields: Sequence[str] = ()) -> None:
    """A header row (*fields*, then any other key in first-seen order), then one row
    per item. Nested values are JSON text, null an empty cell, booleans
    ``true``/``false``."""
    keys: dict[str, None] = dict.fromkeys(fields)
    for row in rows:
        keys.update(dict.fromkeys(row))
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(keys)
    for row in rows:
        writer.writerow([_csv_cell(row.get(key)) for key in keys])


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value)


def _jsonl(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def note(message: str) -> None:
    """A message for the person at the terminal, on stderr (stdout stays parseable)."""
    print(printable(message, keep="\n"), file=sys.stderr)


# -- one run, for `durable show` ------------------------------------------------------

#: The statuses a run ends in (`RunStatus.finished`).
FINISHED = frozenset(status.value for status in RunStatus if status.finished)

ACTION_COLUMNS = (
    Column("AT", 20, field("at", when)),
    Column("ACTION", 6, field("action")),
    Column("ACTOR", 24, field("actor")),
    Column("DETAIL", 60, field("detail", compact)),
)


def run_text(run: Mapping[str, Any], actions: Sequence[Mapping[str, Any]]) -> str:
    """A RunDetail for people: key/value lines, then its properties (state), the
    traceback and the actions."""
    status = run["status"]
    if run.get("cancel_requested") and status not in FINISHED:
        status += " (cancel requested)"  # a finished run's status says how it ended
    elif run.get("pause_requested") and status not in FINISHED:
        status += " (pause requested)"  # it stops at its next durable call
    if run.get("continued_as"):
        status += f" as {run['continued_as']}"  # continue_as_new: the chain goes on there
    lines = [
        ("id", run["id"]),
        ("workflow", run["workflow"]),
        ("status", status),
        ("queue", f"{run['queue']} (priority {run['priority']})"),
        ("parent", run.get("parent_id") or "-"),
        ("version", run.get("version") or "-"),
        *([("continues", run["continues"])] if run.get("continues") else []),
        *([("attributes", as_text(run["attributes"]))] if run.get("attributes") else []),
    ]
    if run.get("origin"):
        lines.append(("forked from", run["origin"]))
    lines += [
        ("created", when(run.get("created_at"))),
        ("started", when(run.get("started_at"))),
        ("finished", when(run.get("finished_at"))),
        ("duration", seconds(run.get("duration"))),
    ]
    if run.get("deadline_at"):
        lines.append(("deadline", when(run["deadline_at"])))
    if run.get("waiting"):
        lines.append(("waiting on", waiting_text(run["waiting"])))
    if run.get("recoveries"):
        lines.append(("recoveries", str(run["recoveries"])))
    lines.append(("children", ", ".join(run.get("children") or []) or "-"))
    lines.append(("input", _value_text(run.get("input"))))
    if run.get("output") is not None or run["status"] == "completed":
        lines.append(("output", _value_text(run.get("output"))))
    if run.get("error"):
        lines.append(("error", error_line(run["error"])))
    text = pairs(lines)
    if run.get("state"):  # the properties the run published, as last stored
        shown = pairs((str(key), _json_text(value)) for key, value in run["state"].items())
        text += "\n\nstate:\n" + "\n".join("  " + line for line in shown.splitlines())
    traceback = (run.get("error") or {}).get("traceback")
    if traceback:
        text += "\n\ntraceback:\n" + "\n".join("  " + line for line in traceback.splitlines())
    if actions:
        text += "\n\nactions:\n" + table(actions, ACTION_COLUMNS)
    return text


def waiting_text(waiting: Mapping[str, Any]) -> str:
    """What a run waits on: ``event 'approved' (until ...)``, ``timer until ...``,
    ``run <id>``."""
    until = f"until {when(waiting['until'])}" if waiting.get("until") else ""
    if waiting.get("kind") == "event":
        return f"event {waiting.get('event')!r}" + (f" ({until})" if until else "")
    if waiting.get("kind") == "run":
        return f"run {waiting.get('run')}"
    return f"timer {until}".strip()


def _json_text(value: Any) -> str:
    """A property's value as JSON: on one line if short, else indented."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    if len(text) <= 100:
        return text
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _value_text(value: Any) -> str:
    text = compact(value) if not isinstance(value, str) else json.dumps(value)
    if len(text) <= 100:
        return text
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
