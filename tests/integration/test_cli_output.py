"""The parts of `durable` every command shares: help with examples, exit codes for
usage errors, and the formatting of tables, times, durations and csv cells."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

from durable.cli.main import build_parser, main
from durable.cli.output import Column, cut, field, seconds, table, when, write_csv

COMMANDS = [
    "worker", "ls", "show", "history", "stats", "start", "cancel", "retry", "send",
    "check", "purge", "ui",
]  # fmt: skip


def test_every_command_is_there() -> None:
    """`durable --help` lists every subcommand, and the exit codes."""
    parser = build_parser()
    listed = parser.format_help()
    for command in COMMANDS:
        assert f"    {command} " in listed
    assert "  3  not found" in listed and "  4  conflict" in listed


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_examples(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`durable COMMAND --help` exits 0 and ends with examples of that command."""
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:\n" in out
    assert f"  durable {command} " in out.split("examples:\n", 1)[1]


@pytest.mark.parametrize(
    "command", ["ls", "show x", "history x", "stats", "start w", "cancel x", "retry x",
                "send x e", "check m"]
)  # fmt: skip
def test_every_format_is_an_option(command: str) -> None:
    """Every operator command takes -o table|json|jsonl|csv, --db, and defaults to the
    table."""
    parser = build_parser()
    for fmt in ("table", "json", "jsonl", "csv"):
        args = parser.parse_args([*command.split(), "-o", fmt, "--db", "sqlite:///x.db"])
        assert (args.output, args.db) == (fmt, "sqlite:///x.db")
    assert parser.parse_args(command.split()).output == "table"


def test_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A command that does not exist exits 2, with argparse's message."""
    assert main(["frobnicate"]) == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_times_are_utc_to_the_second() -> None:
    """ISO times from ops are cut to the second; null is a dash."""
    assert when("2026-11-21T10:00:00.123456Z") == "2026-11-21T10:00:00Z"
    assert when(None) == "-"


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (0.0421, "0.042s"), (12.46, "12.5s"), (187.0, "3m07s"), (7500.0, "2h05m"),
     (200000.0, "2d07h")],
)  # fmt: skip
def test_durations_read_at_a_glance(value: float | None, text: str) -> None:
    """Durations: milliseconds under 10 s, then minutes, hours, days."""
    assert seconds(value) == text


def test_long_cells_are_cut_with_an_ellipsis() -> None:
    """A cell wider than its column is cut and marked; line breaks become spaces."""
    assert cut("abcdef", 4) == "abc…"
    assert cut("abcd", 4) == "abcd"
    assert cut("one\ntwo", 20) == "one two"


def test_tables_have_fixed_columns() -> None:
    """Columns are as wide as their widest cell (capped); nulls show as dashes."""
    columns = (Column("ID", 6, field("id")), Column("N", 3, field("n")))
    rows: list[dict[str, Any]] = [{"id": "a", "n": 1}, {"id": "abcdefgh", "n": None}]
    assert table(rows, columns).splitlines() == ["ID      N", "a       1", "abcde…  -"]


def test_csv_cells_keep_nested_values_as_json() -> None:
    """csv: a header of every key, nested values as JSON text, null empty, booleans as
    in JSON; a header of the given fields even without rows."""
    out = io.StringIO()
    write_csv([{"id": "r", "input": {"args": [1, "a,b"]}, "ok": True, "x": None}], out)
    (row,) = csv.DictReader(io.StringIO(out.getvalue()))
    assert json.loads(row["input"]) == {"args": [1, "a,b"]}
    assert (row["ok"], row["x"]) == ("true", "")
    empty = io.StringIO()
    write_csv([], empty, ("id", "status"))
    assert empty.getvalue() == "id,status\n"
