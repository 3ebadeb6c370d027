"""A command checked before it is launched: its argv, environment, working directory and
program, so that a mistake is a clear error and not a launch that fails in the dark.

The program is looked up here and run by its absolute path, so what runs is exactly
what was checked (the wrapper shell's own lookup could differ when PATH is unset).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from typing import NoReturn, cast

from durable.errors import DurableError

#: The shell a script (``shell=True``) runs in, and the process wrapper's.
SHELL = "/bin/sh"


class CommandNotFound(DurableError, FileNotFoundError):
    """A command that cannot run: its program is not on PATH, not there, or not
    executable. Raised before anything is created or started.

    Attributes:
        command: the program as it was given (``argv[0]``).
    """


def command_line(argv: Sequence[str], *, shell: bool) -> list[str]:
    """The argv to run: *argv* itself, or ``sh -c SCRIPT`` when *shell*.

    Raises:
        TypeError: *argv* is one string without *shell*, or holds a non-string.
        ValueError: *argv* is empty, holds a NUL, or has more than the script when
            *shell*.
    """
    if isinstance(argv, str):
        if not shell:
            raise TypeError(
                f"argv must be a list of strings, not one string ({argv!r}): pass "
                "['program', 'arg', ...], or shell=True to run it as a shell script"
            )
        argv = [argv]
    line = list(argv)
    if not line:
        raise ValueError("argv is empty: give the program to run and its arguments")
    for part in line:
        if not isinstance(part, str):
            raise TypeError(f"argv must hold strings only; got {part!r} in {line!r}")
        if "\0" in part:
            raise ValueError(f"argv cannot hold a NUL character: {part!r}")
    if not shell:
        return line
    if len(line) != 1:
        raise ValueError(
            f"with shell=True, argv is one script string, got {len(line)} items: "
            "join them into one script, or pass shell=False"
        )
    return [SHELL, "-c", line[0]]


def check_env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    """A checked copy of *env* (None stays None: the engine's own environment).

    Raises:
        TypeError: a name or value is not a string.
        ValueError: a name is empty or holds ``=`` or NUL, or a value holds NUL.
    """
    if env is None:
        return None
    checked = {}
    # Checked at run time too: the mapping often comes from a parsed file.
    for key, value in cast("Mapping[object, object]", env).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"env must map strings to strings; got {key!r}: {value!r}")
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise ValueError(
                f"env entry {key!r} cannot be passed: a name must be non-empty, without "
                "'=' or NUL, and a value without NUL"
            )
        checked[key] = value
    return checked


def check_cwd(cwd: str | None) -> str:
    """The absolute working directory for the command (None: this process's).

    Raises:
        FileNotFoundError: *cwd* does not exist.
        NotADirectoryError: *cwd* is not a directory.
    """
    if cwd is None:
        return os.getcwd()
    path = os.path.abspath(cwd)
    if not os.path.exists(path):
        raise FileNotFoundError(f"the command's working directory {cwd!r} does not exist")
    if not os.path.isdir(path):
        raise NotADirectoryError(f"the command's working directory {cwd!r} is not a directory")
    return path


def resolve(program: str, cwd: str, env: Mapping[str, str] | None) -> str:
    """The absolute path of *program*: a name is looked up on PATH (*env*'s, or this
    process's when *env* is None); a path (one with ``/``) is taken relative to *cwd*.

    Raises:
        CommandNotFound: not on PATH, no such file, or not an executable file.
    """
    if "/" in program:
        path = os.path.join(cwd, program)
        if not os.path.exists(path):
            _refuse(program, f"there is no such file (in {cwd})")
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            _refuse(program, f"{path} is not executable (chmod +x it?)")
        return os.path.abspath(path)
    search = (os.environ if env is None else env).get("PATH", os.defpath)
    found = shutil.which(program, path=search)
    if found is None:
        _refuse(program, f"it is not on PATH (PATH={search})")
    return os.path.abspath(found)


def _refuse(program: str, why: str) -> NoReturn:
    """Raise `CommandNotFound` for *program*, saying *why*."""
    raise CommandNotFound(f"command {program!r} not found: {why}", command=program)
