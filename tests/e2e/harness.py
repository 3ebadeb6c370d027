"""Child processes for crash tests: start them, wait for their pause points, end them.

Only processes this harness started are ever signalled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class Children:
    """The child processes of one test, and the files they share with it."""

    def __init__(self, tmp: Path, url: str) -> None:
        self.url = url
        self.ledger = tmp / "ledger.txt"
        self.markers = tmp / "markers"
        self.markers.mkdir()
        self.logs = tmp / "logs"
        self.logs.mkdir()
        self.started: list[subprocess.Popen[str]] = []
        self._log_paths: dict[int, Path] = {}

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        """Start ``python -m tests.e2e.app ARGS`` with extra environment variables."""
        return self.spawn(["-m", "tests.e2e.app", *args], **env)

    def start_worker(self, *options: str, **env: str) -> subprocess.Popen[str]:
        """Start ``durable worker tests.e2e.workers_app`` on this test's database."""
        command = ["-m", "durable", "worker", "tests.e2e.workers_app", "--db", self.url]
        return self.spawn([*command, "--log-level", "INFO", *options], **env)

    def spawn(self, args: list[str], **env: str) -> subprocess.Popen[str]:
        """Start ``python ARGS`` in the project root with the test's environment."""
        return self.command([sys.executable, *args], **env)

    def environment(self, **env: str) -> dict[str, str]:
        """The environment children run in: this test's files, and *env*."""
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "DURABLE_TEST_LEDGER": str(self.ledger),
            "DURABLE_TEST_MARKERS": str(self.markers),
            **env,
        }

    def command(self, argv: list[str], **env: str) -> subprocess.Popen[str]:
        """Start the program *argv* in the project root with the test's environment."""
        environment = self.environment(**env)
        log_path = self.logs / f"child-{len(self.started)}.log"
        # stderr to a file: a busy worker's log would fill an unread pipe and block it.
        with log_path.open("w") as log:
            process = subprocess.Popen(
                argv, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=log, text=True
            )
        self.started.append(process)
        self._log_paths[process.pid] = log_path
        return process

    def log(self, process: subprocess.Popen[str]) -> str:
        """Everything a child wrote to stderr (its log) so far."""
        return self._log_paths[process.pid].read_text()

    def wait_for_pause(self, point: str, timeout: float = 30) -> int:
        """Wait until some child reaches *point*; return its pid."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = sorted(self.markers.glob(f"{point}.*"))
            if found:
                return int(found[0].suffix[1:])
            for process in self.started:
                if process.poll() not in (None, 0, -9):
                    raise AssertionError(
                        f"child exited with {process.returncode}: {self.output(process)}"
                    )
            time.sleep(0.01)
        raise AssertionError(f"no child reached pause point {point!r} within {timeout}s")

    def release(self, point: str, pid: int) -> None:
        """Let a paused child continue."""
        (self.markers / f"{point}.{pid}").unlink()

    def kill(self, process: subprocess.Popen[str], sig: int = signal.SIGKILL) -> None:
        """Send *sig* to a child this harness started, and reap it if it was killed."""
        assert process in self.started, "only our own children are ever signalled"
        process.send_signal(sig)
        if sig == signal.SIGKILL:
            process.wait(10)

    def finish(self, process: subprocess.Popen[str], timeout: float = 60) -> Any:
        """Wait for a child to exit successfully; return the JSON it printed, if any."""
        out, _ = process.communicate(timeout=timeout)
        assert process.returncode == 0, f"child failed ({process.returncode}):\n{self.log(process)}"
        lines = out.strip().splitlines()
        return json.loads(lines[-1]) if lines else None

    def output(self, process: subprocess.Popen[str]) -> str:
        """Whatever a finished child printed, and its log."""
        out, _ = process.communicate(timeout=5)
        return f"{out}\n{self.log(process)}"

    def bodies(self) -> Counter[tuple[str, int]]:
        """How many times each (run, position) task body started, from the ledger."""
        if not self.ledger.exists():
            return Counter()
        lines = self.ledger.read_text().splitlines()
        return Counter(
            (run, int(position)) for run, position, _pid in (line.split() for line in lines)
        )

    def close(self) -> None:
        """Kill and reap any child still running."""
        for process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
                process.wait(10)
            if process.stdout is not None:
                process.stdout.close()
