"""What `durable` subcommands share: the database option, positive counts, and
importing the modules that define workflows."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from durable.backends import DEFAULT_URL


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
