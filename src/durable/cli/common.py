"""Options every `durable` subcommand shares: the database, positive counts."""

from __future__ import annotations

import argparse
import os

from durable.runtime.engine import DEFAULT_URL


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """``--db URL``, defaulting to ``$DURABLE_DATABASE_URL``, else the embedded file."""
    parser.add_argument(
        "--db",
        default=os.environ.get("DURABLE_DATABASE_URL"),
        metavar="URL",
        help=f"database URL (default: $DURABLE_DATABASE_URL, else {DEFAULT_URL})",
    )


def positive(text: str) -> int:
    """A whole number of at least 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number.")
    return value
