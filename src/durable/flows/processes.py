"""Commands run in processes that outlive the engine (seed 001's fail-safe engine).

A flow's command must not die with the engine that started it, and a restarted engine
must pick up its finish without running it again. So a command never runs as a plain
child with pipes: `launch` starts it under a tiny ``/bin/sh`` wrapper in a session of
its own, with its output appended to a file, and everything the engine needs later is a
file in one directory per launch::

    launch.json   what was launched: argv, env keys, cwd, host, boot id, started_at
    pid           "<pid> <start time>" of the wrapper (written before the command runs)
    output.log    the command's stdout and stderr, appended as it writes them
    exit          the command's exit code, written when it ends (its mtime: the finish)
    killed        present once `kill` was asked to end it

Any process that can read the directory can `find` out how the launch stands, `kill`
it, or read its `outcome`, whether or not it is the one that launched it.

Exit codes are the shell's: a command killed by signal N ends with 128 + N (143 for
SIGTERM, 137 for SIGKILL), as ``sh`` reports it, so an exit code alone cannot tell a
signal from a command that exited with that number; ``killed`` tells a `kill`.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from . import _logtail, _reaper
from ._commands import SHELL, CommandNotFound, check_cwd, check_env, command_line, resolve
from ._launch_files import EXIT, KILLED, LAUNCH, OUTPUT, PID, exit_of, launch_info, pid_of, write
from ._liveness import UNKNOWN_START, ExitWatch, alive, boot_id, proc_start, this_host

__all__ = [
    "CommandNotFound",
    "ExitWatch",
    "Found",
    "alive",
    "find",
    "kill",
    "launch",
    "outcome",
    "read_log",
]

State = Literal["absent", "running", "finished", "lost"]

#: How long a launch may go without a pid file before it counts as lost: the wrapper
#: writes it within milliseconds, so only an engine that died between creating the
#: directory and starting the wrapper leaves a directory without one for longer.
START_GRACE = 10.0
#: How long `kill` waits for the processes to end after SIGKILL (they cannot refuse).
KILL_WAIT = 5.0
_POLL = 0.01

# The wrapper: $1 the launch directory, then the command's argv.
# It traps TERM and INT so that it outlives a signal sent to its whole group and can
# still record how the command ended; it passes them on to the command, which it runs
# in the background for that. The command's own shell drops the traps, then looks for
# the kill marker before it execs: `kill` writes the marker before any signal, so a
# TERM that came while the command was being started, and was caught by a trap, is
# not lost. It writes its pid first and runs nothing if it cannot; it runs nothing
# either if the launch was killed before it started. Then the exit code. Each file
# is written by one echo, a single write ending in a newline: a reader that finds no
# newline yet treats the file as not written (`_launch_files`). No rename: each would
# cost a process. Its pid goes to a file of its own: the engine writes ``pid`` (whole,
# by a rename) as soon as it has spawned it; the wrapper's copy counts if it did not.
_WRAPPER = """\
d=$1; shift
child=
trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM INT
me() { if read -r s 2>/dev/null </proc/$$/stat; then s=${s##*) }; set -- $s; shift 19
echo "$$ $1"; else echo "$$ -"; fi; }
me >"$d/pid.wrapper" || exit 125
if [ -e "$d/killed" ]; then code=143; else
(trap - TERM INT; [ -e "$d/killed" ] && exit 143; exec "$@") &
child=$!
while :; do wait "$child"; code=$?; kill -0 "$child" 2>/dev/null || break; done
fi
echo $code >"$d/exit"
exit $code
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """How one launch stands, as read from its directory by `find`.

    Attributes:
        state: ``"absent"`` (nothing launched in this directory), ``"running"`` (the
            wrapper lives: its pid and start time match; also while a launch is
            starting, and for a launch made on another host, which cannot be checked
            from here), ``"finished"`` (the exit file is there) or ``"lost"``
            (launched, not alive, no exit file: killed with SIGKILL along with its
            group, or its machine rebooted).
        pid: the wrapper's pid (the command's process group and session).
        started_at: when the launch was made (epoch seconds).
        exit_code: the command's exit code once finished; 128 + N for signal N.
        finished_at: when it finished (epoch seconds): the exit file's modification
            time, which the kernel may stamp from a clock up to one tick (a few ms)
            behind ``time.time()``, so a duration may read a few ms short.
        host: the host it was launched on.
        killed: `kill` was asked to end it.
    """

    state: State
    pid: int | None = None
    started_at: float | None = None
    exit_code: int | None = None
    finished_at: float | None = None
    host: str | None = None
    killed: bool = False


def launch(
    directory: Path,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    shell: bool = False,
) -> Found:
    """Start *argv* in a process that outlives this one, recorded in *directory*.

    The command runs under a ``/bin/sh`` wrapper in a new session (the engine's death,
    a Ctrl-C or a SIGHUP to the engine's group never reaches it), with stdin from
    /dev/null and stdout and stderr appended to ``output.log``. Its program is looked
    up here, before anything is created, and run by its absolute path.

    This process reaps the wrapper when it ends (one shared daemon thread polls the
    wrappers it launched; a library may not take SIGCHLD), so no zombie is left
    behind; if this process dies first the wrapper is reparented and reaped by the
    system.

    Args:
        directory: created here (its parents too); one per launch, stable across
            engine crashes, so that a restarted engine finds the launch again.
        argv: the program and its arguments, passed literally (no shell); with
            *shell*, one string: a script run by ``sh -c``.
        env: the command's whole environment (None: this process's); its PATH, if
            any, is where the program is looked up.
        cwd: the command's working directory (None: this process's).
        shell: run the single string in *argv* as a shell script.

    Returns:
        The launch, ``"running"``: its pid file is written before this returns.

    Raises:
        FileExistsError: *directory* already exists: a launch was made there (adopt it
            with `find` instead); nothing is started.
        CommandNotFound: the program is not found or not executable.
        NotADirectoryError, FileNotFoundError: *cwd* is not an existing directory.
        TypeError, ValueError: *argv* or *env* is malformed; the message says how.
    """
    workdir = check_cwd(cwd)
    line = command_line(argv, shell=shell)
    environment = check_env(env)
    if not shell:
        line[0] = resolve(line[0], workdir, environment)
    where = Path(os.path.abspath(directory))
    where.parent.mkdir(parents=True, exist_ok=True)
    try:
        where.mkdir()
    except FileExistsError:
        raise FileExistsError(
            errno.EEXIST,
            "a launch was already made in this directory: adopt it with find() "
            "instead of launching again",
            str(where),
        ) from None
    started_at = time.time()
    write(
        where / LAUNCH,
        json.dumps(
            {
                "argv": list(argv) if not isinstance(argv, str) else [argv],
                "program": line[0],
                "shell": shell,
                "env_keys": sorted(environment) if environment is not None else None,
                "cwd": workdir,
                "host": this_host(),
                "boot_id": boot_id(),
                "started_at": started_at,
            }
        ),
    )
    process = _spawn(where, line, environment, workdir)
    write(where / PID, f"{process.pid} {proc_start(process.pid) or UNKNOWN_START}\n")
    _reaper.reap(process)
    return Found(state="running", pid=process.pid, started_at=started_at, host=this_host())


def find(directory: Path) -> Found:
    """How the launch in *directory* stands; a few small reads, cheap enough to poll.

    The exit file is read first and again after the wrapper is seen dead, so a command
    that ends between the two reads is finished, never lost.
    """
    where = Path(directory)
    info = launch_info(where)
    if info is None and not where.is_dir():
        return Found(state="absent")
    ended = exit_of(where)
    wrapper = pid_of(where)
    state: State = "running"
    if ended is not None or not _might_live(where, info, wrapper):
        ended = ended or exit_of(where)  # it may have ended between the two reads
        state = "lost" if ended is None else "finished"
    return Found(
        state=state,
        pid=wrapper[0] if wrapper else None,
        started_at=info.get("started_at") if info else None,
        exit_code=ended[0] if ended else None,
        finished_at=ended[1] if ended else None,
        host=info.get("host") if info else None,
        killed=(where / KILLED).exists(),
    )


def read_log(directory: Path, limit: int) -> tuple[str, int]:
    """The last *limit* bytes (at most) of the launch's output, decoded as UTF-8 (an
    invalid byte becomes U+FFFD; a character is never cut in half), and how many bytes
    came before them. Reads only what it returns, however large the log.

    Raises:
        ValueError: *limit* is negative.
    """
    return _logtail.tail(Path(directory) / OUTPUT, limit)


def outcome(directory: Path, log_limit: int) -> dict[str, Any]:
    """What the launch in *directory* came to, as JSON-able data.

    Keys: ``state``, ``exit_code``, ``started_at``, ``finished_at``, ``pid``,
    ``host``, ``killed``; ``log``: its output capped at about *log_limit* bytes (when
    longer: the first quarter, a line ``[... N bytes dropped ...]``, the rest from its
    end); ``log_bytes``: the output's whole size; ``log_dropped``: the bytes left out.
    Memory stays bounded by *log_limit* however large the log.

    Raises:
        ValueError: *log_limit* is less than 1.
    """
    found = find(directory)
    log, size, dropped = _logtail.capped(Path(directory) / OUTPUT, log_limit)
    return {
        "state": found.state,
        "exit_code": found.exit_code,
        "started_at": found.started_at,
        "finished_at": found.finished_at,
        "pid": found.pid,
        "host": found.host,
        "killed": found.killed,
        "log": log,
        "log_bytes": size,
        "log_dropped": dropped,
    }


def kill(directory: Path, grace: float = 5.0) -> bool:
    """End the launch in *directory*: SIGTERM to its whole process group, then SIGKILL
    if it still lives after *grace* seconds. Works from any process on the host it
    was launched on: only the files are shared.

    The ``killed`` marker is written before any signal, so `find` and `outcome` report
    ``killed`` however the kill goes, and a wrapper that had not started yet runs
    nothing. When SIGKILL leaves the wrapper no chance to record the exit, this writes
    it: 137 (128 + SIGKILL).

    Returns:
        True if the launch was running (or starting), False if it had already ended or
        there is none.

    Raises:
        ProcessLookupError: it runs on another host; kill it from there.
    """
    where = Path(directory)
    found = find(where)
    if found.state != "running":
        return False
    if found.host is not None and found.host != this_host():
        raise ProcessLookupError(
            errno.ESRCH, f"launched on host {found.host!r}, not here: kill it there", str(where)
        )
    (where / KILLED).touch()
    wrapper = pid_of(where) or _await_pid(where, time.monotonic() + grace)
    if wrapper is None:
        return True  # never started; if its wrapper starts now it sees the marker
    sent = signal.SIGTERM
    if not _signal_until_dead(wrapper, sent, grace):
        sent = signal.SIGKILL
        _signal_until_dead(wrapper, sent, KILL_WAIT)
    if not alive(*wrapper) and exit_of(where) is None:
        write(where / EXIT, f"{128 + sent}\n")
    return True


def _spawn(
    where: Path, line: list[str], env: dict[str, str] | None, cwd: str
) -> subprocess.Popen[bytes]:
    """Start the wrapper in a new session, output appended to the log. If it cannot
    start, the directory is removed again, so the launch stays absent."""
    log = os.open(where / OUTPUT, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        return subprocess.Popen(
            [SHELL, "-c", _WRAPPER, "durable-wrapper", str(where), *line],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except BaseException:
        for name in (OUTPUT, LAUNCH):
            (where / name).unlink(missing_ok=True)
        where.rmdir()
        raise
    finally:
        os.close(log)


def _might_live(where: Path, info: dict[str, Any] | None, wrapper: tuple[int, str] | None) -> bool:
    """Whether the launch may still be running: its wrapper alive, it is on another
    host (where its pid means nothing here), or it is still within `START_GRACE`
    without a pid file."""
    if wrapper is None:
        started = info.get("started_at") if info else None
        since = started if started is not None else where.stat().st_mtime
        return time.time() - since < START_GRACE
    if info is not None and info.get("host") != this_host():
        return True
    if info is not None and info.get("boot_id") != boot_id():
        return False  # the machine rebooted: pids and start times begin anew
    return alive(*wrapper)


def _await_pid(where: Path, deadline: float) -> tuple[int, str] | None:
    """The wrapper's pid once its file appears, or None at *deadline*."""
    while time.monotonic() < deadline:
        time.sleep(_POLL)
        wrapper = pid_of(where)
        if wrapper is not None:
            return wrapper
    return None


def _signal_until_dead(wrapper: tuple[int, str], sent: signal.Signals, wait: float) -> bool:
    """Send *sent* to the wrapper's process group (its session: the command with it)
    and wait up to *wait* seconds for the wrapper to end; whether it did."""
    pid, start = wrapper
    if not alive(pid, start):
        return True  # never signal a pid that is no longer ours
    try:
        os.killpg(pid, sent)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + wait
    while alive(pid, start):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL)
    return True
