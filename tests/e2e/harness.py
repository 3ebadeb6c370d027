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
        self.started: list[subprocess.Popen[str]] = []

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        """Start ``python -m tests.e2e.app ARGS`` with extra environment variables."""
        environment = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "DURABLE_TEST_LEDGER": str(self.ledger),
            "DURABLE_TEST_MARKERS": str(self.markers),
            **env,
        }
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.app", *args],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.started.append(process)
        return process

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
        """Wait for a child to exit successfully; return the JSON it printed."""
        out, err = process.communicate(timeout=timeout)
        assert process.returncode == 0, f"child failed ({process.returncode}):\n{err}"
        process.stderr_text = err  # type: ignore[attr-defined]
        return json.loads(out.strip().splitlines()[-1])

    @staticmethod
    def output(process: subprocess.Popen[str]) -> str:
        """Whatever a finished child printed."""
        out, err = process.communicate(timeout=5)
        return f"{out}\n{err}"

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
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
