"""Commands in processes that outlive the engine (durable.flows.processes, seed 001's
fail-safe engine): real processes, real files, launched, found, killed and read back."""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable.flows import processes
from durable.flows._liveness import proc_start
from durable.flows.processes import CommandNotFound, Found

pytestmark = pytest.mark.timeout(60)

# Launches a command, says so, then waits to be killed (as an engine would be).
LAUNCHER = """
import sys, time
from pathlib import Path
from durable.flows import processes
processes.launch(Path(sys.argv[1]), ["sh", "-c", "sleep 1; echo done"])
print("launched", flush=True)
time.sleep(60)
"""


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Path]:
    """A launch directory; whatever still runs there is killed at the end."""
    directory = tmp_path / "runs" / "task-1"
    yield directory
    processes.kill(directory, grace=0)


def settle(directory: Path, timeout: float = 10.0) -> Found:
    """The launch once it has finished or is lost, polled with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        found = processes.find(directory)
        if found.state in ("finished", "lost"):
            return found
        assert time.monotonic() < deadline, f"still {found.state} after {timeout}s"
        time.sleep(0.01)


def log_shows(directory: Path, text: str, timeout: float = 10.0) -> None:
    """Wait until the launch's output holds *text*."""
    deadline = time.monotonic() + timeout
    while text not in processes.read_log(directory, 4096)[0]:
        assert time.monotonic() < deadline, f"{text!r} never appeared in the log"
        time.sleep(0.01)


def test_a_command_finishes_with_its_exit_code_and_output(place: Path) -> None:
    """A command's exit code and output are read back from its directory."""
    before = time.time()
    launched = processes.launch(place, ["sh", "-c", "echo hi; echo oops >&2; exit 3"])
    assert launched.state == "running" and launched.pid is not None

    found = settle(place)
    assert found.state == "finished" and found.exit_code == 3 and not found.killed
    assert found.pid == launched.pid and found.host == launched.host
    assert found.started_at is not None and found.finished_at is not None
    assert before <= found.started_at <= found.finished_at <= time.time()
    result = processes.outcome(place, log_limit=1000)
    assert result == {
        "state": "finished",
        "exit_code": 3,
        "started_at": found.started_at,
        "finished_at": found.finished_at,
        "pid": found.pid,
        "host": found.host,
        "killed": False,
        "log": "hi\noops\n",
        "log_bytes": 8,
        "log_dropped": 0,
    }
    assert json.loads(json.dumps(result)) == result
    assert processes.read_log(place, 5) == ("oops\n", 3)


def test_nothing_launched_is_absent(tmp_path: Path) -> None:
    """A directory that does not exist holds no launch, and its log is empty."""
    assert processes.find(tmp_path / "nothing") == Found(state="absent")
    assert processes.read_log(tmp_path / "nothing", 100) == ("", 0)
    assert processes.kill(tmp_path / "nothing") is False


def test_a_second_launch_in_the_same_directory_starts_nothing(place: Path, tmp_path: Path) -> None:
    """Launching twice in one directory is refused, so a command never runs twice."""
    ledger = tmp_path / "ledger"
    processes.launch(place, ["sh", "-c", f"echo first >> {ledger}"])
    with pytest.raises(FileExistsError, match="adopt it with find"):
        processes.launch(place, ["sh", "-c", f"echo second >> {ledger}"])
    assert settle(place).exit_code == 0
    assert ledger.read_text() == "first\n"


def test_the_command_outlives_the_engine_that_launched_it(place: Path) -> None:
    """SIGKILL of the launching process and its whole group leaves the command running;
    its finish is then read from the files."""
    engine = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(place)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert engine.stdout is not None
    assert engine.stdout.readline() == "launched\n"
    os.killpg(engine.pid, signal.SIGKILL)
    engine.wait()
    engine.stdout.close()

    found = processes.find(place)
    assert found.state == "running"
    assert found.pid is not None
    parent = int(Path(f"/proc/{found.pid}/stat").read_text().rpartition(")")[2].split()[1])
    assert parent != engine.pid  # reparented: its launcher is gone
    found = settle(place)
    assert (found.state, found.exit_code) == ("finished", 0)
    assert processes.read_log(place, 100) == ("done\n", 0)


def test_a_launch_killed_with_its_group_is_lost(place: Path) -> None:
    """A wrapper that died without writing its exit (SIGKILL, a reboot) is lost."""
    launched = processes.launch(place, ["sleep", "60"])
    assert launched.pid is not None
    start = proc_start(launched.pid)
    assert start is not None
    assert processes.alive(launched.pid, start)
    assert not processes.alive(launched.pid, str(int(start) + 1))  # a recycled pid

    os.killpg(launched.pid, signal.SIGKILL)
    found = settle(place)
    assert (found.state, found.exit_code, found.killed) == ("lost", None, False)
    assert not processes.alive(launched.pid, start)
    assert processes.kill(place) is False


def test_a_zombie_is_not_alive() -> None:
    """A process that ended but was not reaped yet counts as ended."""
    child = subprocess.Popen(["true"])
    start = proc_start(child.pid)
    assert start is not None
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not processes.alive(child.pid, start)
    child.wait()


def test_kill_ends_a_command_within_its_grace(place: Path) -> None:
    """SIGTERM ends a command that does not refuse it; the launch is marked killed."""
    processes.launch(place, ["sleep", "60"])
    began = time.monotonic()
    assert processes.kill(place, grace=5.0) is True
    assert time.monotonic() - began < 2.0
    found = processes.find(place)
    assert (found.state, found.exit_code, found.killed) == ("finished", 128 + 15, True)
    assert processes.outcome(place, 100)["killed"] is True
    assert processes.kill(place) is False


def test_kill_uses_sigkill_on_a_command_that_ignores_term(place: Path, tmp_path: Path) -> None:
    """A command that ignores SIGTERM, and its own children, die by SIGKILL after the
    grace."""
    script = f'trap "" TERM; sleep 60 & echo $! > {tmp_path}/child; echo ready; wait'
    processes.launch(place, ["sh", "-c", script])
    log_shows(place, "ready")
    child = int((tmp_path / "child").read_text())
    child_start = proc_start(child)
    assert child_start is not None

    began = time.monotonic()
    assert processes.kill(place, grace=0.5) is True
    assert time.monotonic() - began >= 0.5
    result = processes.outcome(place, 100)
    assert (result["state"], result["exit_code"], result["killed"]) == ("finished", 137, True)
    assert not processes.alive(child, child_start)


def test_kill_works_from_another_process(place: Path) -> None:
    """Only the files are shared: a process that did not launch the command kills it."""
    processes.launch(place, ["sleep", "60"])
    code = "import sys; from durable.flows import processes; print(processes.kill(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(place)], capture_output=True, text=True, check=True
    )
    assert done.stdout == "True\n"
    found = processes.find(place)
    assert (found.state, found.exit_code, found.killed) == ("finished", 143, True)


def test_env_and_cwd_are_passed(place: Path, tmp_path: Path) -> None:
    """The command gets exactly the environment given and runs in its directory."""
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "GREETING": "hello there"}
    script = 'echo "$GREETING"; pwd; echo "${HOME-no home}"'
    processes.launch(place, ["sh", "-c", script], env=env, cwd=str(work))
    assert settle(place).exit_code == 0
    assert processes.read_log(place, 1000)[0] == f"hello there\n{work}\nno home\n"


def test_shell_runs_a_script_string(place: Path) -> None:
    """With shell=True the one string is a shell script: pipes and loops work."""
    processes.launch(place, "for i in 1 2 3; do echo $i; done | tail -n 1; exit 4", shell=True)
    found = settle(place)
    assert found.exit_code == 4
    assert processes.read_log(place, 100)[0] == "3\n"


def test_arguments_are_passed_literally(place: Path) -> None:
    """Without a shell, spaces, quotes, $ and globs reach the program untouched."""
    arguments = ["a b", 'it\'s "q"', "$HOME", "*", "; echo no", ""]
    processes.launch(place, ["printf", "[%s]\\n", *arguments])
    assert settle(place).exit_code == 0
    assert processes.read_log(place, 1000)[0] == "".join(f"[{a}]\n" for a in arguments)


def test_a_missing_program_is_refused_before_anything_is_created(
    place: Path, tmp_path: Path
) -> None:
    """A program not on PATH, not there or not executable raises CommandNotFound, and
    no directory is created."""
    (tmp_path / "notes.txt").write_text("echo hi\n")
    with pytest.raises(
        CommandNotFound, match="command 'no-such-program' not found: it is not on PATH"
    ):
        processes.launch(place, ["no-such-program"], env={"PATH": "/usr/bin:/bin"})
    with pytest.raises(FileNotFoundError, match="no such file"):
        processes.launch(place, ["./missing.sh"], cwd=str(tmp_path))
    with pytest.raises(CommandNotFound, match="not executable"):
        processes.launch(place, ["./notes.txt"], cwd=str(tmp_path))
    assert not place.exists()


def test_command_not_found_pickles_with_its_fields() -> None:
    """CommandNotFound crosses processes like every durable error."""
    error = CommandNotFound("command 'x' not found: it is not on PATH (PATH=)", command="x")
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, FileNotFoundError) and copy.command == "x"
    assert str(copy) == str(error)


@pytest.mark.parametrize(
    ("argv", "options", "error", "message"),
    [
        ("echo hi", {}, TypeError, "not one string"),
        ([], {}, ValueError, "argv is empty"),
        (["echo", "a\0b"], {}, ValueError, "NUL"),
        (["echo hi", "x"], {"shell": True}, ValueError, "one script string"),
        (["true"], {"env": {"A=B": "1"}}, ValueError, "'A=B' cannot be passed"),
        (["true"], {"cwd": "/no/such/dir"}, FileNotFoundError, "does not exist"),
        (["true"], {"cwd": "/etc/hostname"}, NotADirectoryError, "not a directory"),
    ],
)
def test_bad_input_is_refused_before_anything_is_created(
    place: Path, argv: object, options: dict[str, object], error: type[Exception], message: str
) -> None:
    """Malformed argv, env or cwd is a clear error, and nothing is launched."""
    with pytest.raises(error, match=message):
        processes.launch(place, argv, **options)  # type: ignore[arg-type]
    assert not place.exists()


def test_outcome_keeps_the_head_and_tail_of_a_huge_log(place: Path) -> None:
    """A 5 MB log is capped to log_limit: its first quarter, a note, the rest of its
    end; read_log gives the tail."""
    lines = 294_118  # of 17 bytes: 5 MB
    processes.launch(place, ["sh", "-c", f"yes 0123456789abcdef | head -n {lines}; echo END"])
    assert settle(place).exit_code == 0
    size = 17 * lines + 4
    result = processes.outcome(place, log_limit=1000)
    assert (result["log_bytes"], result["log_dropped"]) == (size, size - 1000)
    parts = re.fullmatch(r"(.*)\n\[\.\.\. (\d+) bytes dropped \.\.\.\]\n(.*)", result["log"], re.S)
    assert parts is not None
    head, dropped, end = parts.groups()
    assert len(head) == 250 and head.startswith("0123456789abcdef\n")
    assert int(dropped) == size - 1000
    assert len(end) == 750 and end.endswith("0123456789abcdef\nEND\n")
    assert processes.read_log(place, 20) == ("\n0123456789abcdef\nEND\n"[-20:], size - 20)


def test_reads_never_cut_a_character_in_half(place: Path) -> None:
    """A limit that falls inside a multibyte character leaves the whole character out."""
    processes.launch(place, ["printf", "ééééé"])  # ten bytes
    assert settle(place).exit_code == 0
    assert processes.read_log(place, 3) == ("é", 8)
    result = processes.outcome(place, log_limit=5)
    assert (result["log"], result["log_dropped"]) == ("[... 6 bytes dropped ...]\néé", 6)


def test_no_zombie_is_left_behind(place: Path) -> None:
    """The launching process reaps the wrapper once it ends."""
    launched = processes.launch(place, ["true"])
    assert launched.pid is not None
    settle(place)
    deadline = time.monotonic() + 5
    while Path(f"/proc/{launched.pid}").exists():
        assert time.monotonic() < deadline, "the finished wrapper was never reaped"
        time.sleep(0.01)
    with pytest.raises(ChildProcessError):
        os.waitpid(launched.pid, os.WNOHANG)


def test_a_launch_whose_wrapper_never_started_is_lost_after_a_grace(tmp_path: Path) -> None:
    """An engine that died between creating the directory and starting the wrapper
    leaves a launch that is starting for a while, then lost."""
    for name, age in (("fresh", 0.0), ("stale", processes.START_GRACE + 1)):
        (tmp_path / name).mkdir()
        record = {"started_at": time.time() - age, "host": os.uname().nodename}
        (tmp_path / name / "launch.json").write_text(json.dumps(record))
    assert processes.find(tmp_path / "fresh").state == "running"
    assert processes.find(tmp_path / "stale").state == "lost"


def test_a_launch_from_another_boot_or_host(place: Path) -> None:
    """A pid from before a reboot means nothing (lost); one from another host cannot be
    checked or killed from here (running)."""
    launched = processes.launch(place, ["sleep", "60"])
    assert launched.pid is not None
    record = json.loads((place / "launch.json").read_text())
    try:
        (place / "launch.json").write_text(json.dumps({**record, "boot_id": "another boot"}))
        assert processes.find(place).state == "lost"
        (place / "launch.json").write_text(json.dumps({**record, "host": "elsewhere"}))
        assert processes.find(place).state == "running"
        with pytest.raises(ProcessLookupError, match="launched on host 'elsewhere'"):
            processes.kill(place)
    finally:
        (place / "launch.json").write_text(json.dumps(record))  # the fixture kills it
