"""The files of one launch's directory, and how each is read and written.

One directory per launch holds everything about it (the files are listed in
`durable.flows.processes`), so any process that can read the directory (a restarted
engine, the CLI) knows what the launching process knew. Every file but the log is
written whole or not at all (a temporary file, then a rename), so a reader in another
process never sees half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

LAUNCH, PID, OUTPUT, EXIT, KILLED = "launch.json", "pid", "output.log", "exit", "killed"
#: the wrapper's own record of its pid, for an engine that died before writing ``pid``.
WRAPPER_PID = "pid.wrapper"


def launch_info(where: Path) -> dict[str, Any] | None:
    """The launch record, or None when it is not (yet) written."""
    try:
        info: dict[str, Any] = json.loads((where / LAUNCH).read_bytes())
    except (FileNotFoundError, NotADirectoryError):
        return None
    return info


def pid_of(where: Path) -> tuple[int, str] | None:
    """The wrapper's pid and start time, or None before either copy is written: the
    engine's (whole, by a rename), else the wrapper's own (one write ending in a
    newline: without it, not written yet)."""
    for name in (PID, WRAPPER_PID):
        try:
            text = (where / name).read_text(encoding="ascii")
        except FileNotFoundError:
            continue
        if text.endswith("\n"):
            pid, start = text.split()
            return int(pid), start
    return None


def exit_of(where: Path) -> tuple[int, float] | None:
    """The exit code and finish time (the file's mtime), or None while it runs. The
    wrapper writes the file with one ``echo`` (no rename: a rename would cost a process
    per command), so a file without its final newline is one being written.

    Raises:
        ValueError: the exit file holds no exit code (edited by hand?); it names it.
    """
    path = where / EXIT
    try:
        text = path.read_text(encoding="ascii")
        finished_at = path.stat().st_mtime
    except FileNotFoundError:
        return None
    if not text.endswith("\n"):
        return None
    try:
        return int(text), finished_at
    except ValueError:
        raise ValueError(f"{path} should hold an exit code, it holds {text!r}") from None


def write(path: Path, text: str) -> None:
    """Write *text* to *path* whole or not at all (a temporary file, then a rename),
    so a reader in another process never sees half of it."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
