"""Flow files whose commands are real shell scripts writing to a ledger, and the checks
the ledger allows: each task started only after its dependencies ended, never more
tasks at once than ``max_running``, each started as often as expected.

Each command is ``step.sh SECONDS``: it appends ``start TASK NS ATTEMPT`` to the
ledger, sleeps, fails with exit 7 while the file ``fail.TASK`` exists in the test's
directory (else exits 0), and appends ``end TASK NS CODE``. Times are the clock's
nanoseconds (``date +%s%N``), one clock for every task.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STEP = """\
#!/bin/sh
echo "start $DURABLE_TASK $(date +%s%N) $DURABLE_TASK_ATTEMPT" >> "$LEDGER"
[ "${1:-0}" = 0 ] || sleep "$1"
code=0
[ -e "$STATE/fail.$DURABLE_TASK" ] && code=7
echo "end $DURABLE_TASK $(date +%s%N) $code" >> "$LEDGER"
exit $code
"""

# A launch's finish time is its exit file's modification time, which the kernel stamps
# from its coarse clock: up to one tick (10 ms at HZ=100) behind time.time(), the clock
# of its start. So a command that sleeps 0.2 s may read as lasting 0.199 s.
TICK = 0.01


@dataclass
class Ledger:
    """A test's directory: the step script, the ledger, the flow files."""

    root: Path
    path: Path = field(init=False)
    step: Path = field(init=False)

    def __post_init__(self) -> None:
        self.path = self.root / "ledger.txt"
        self.step = self.root / "step.sh"
        self.step.write_text(STEP)
        self.step.chmod(0o755)

    def task(self, name: str, seconds: float = 0.0, depends_on: tuple[str, ...] = ()) -> str:
        """One ``[task.NAME]`` table running the step script."""
        env = f'env = {{ LEDGER = "{self.path}", STATE = "{self.root}" }}'
        deps = ", ".join(f'"{d}"' for d in depends_on)
        return f'[task.{name}]\ncommand = [{_q(str(self.step))}, "{seconds}"]\n{env}\n' + (
            f"depends_on = [{deps}]\n" if depends_on else ""
        )

    def flow(self, name: str, tasks: list[str], max_running: int | None = None) -> Path:
        """A flow file of the task tables *tasks*; its path."""
        head = f'[flow]\nname = "{name}"\n' + (
            f"max_running = {max_running}\n" if max_running else ""
        )
        path = self.root / f"{name}.toml"
        path.write_text(head + "\n" + "\n".join(tasks))
        return path

    def fail(self, task: str, failing: bool = True) -> None:
        """Make *task*'s step exit 7 (or succeed again)."""
        marker = self.root / f"fail.{task}"
        if failing:
            marker.touch()
        else:
            marker.unlink(missing_ok=True)

    def lines(self) -> list[tuple[str, str, int, str]]:
        """The ledger's lines: (start|end, task, ns, attempt|code)."""
        if not self.path.exists():
            return []
        found = []
        for line in self.path.read_text().splitlines():
            kind, task, ns, extra = line.split()
            found.append((kind, task, int(ns), extra))
        return found

    def starts(self) -> Counter[str]:
        """How many times each task's command started."""
        return Counter(task for kind, task, _, _ in self.lines() if kind == "start")

    def check_order(self, dependencies: dict[str, tuple[str, ...]]) -> None:
        """Every start of a task came after the last successful end of each dependency
        before it; a start with a dependency that never ended is an error."""
        ended: dict[str, int] = {}
        for kind, task, ns, extra in sorted(self.lines(), key=lambda line: line[2]):
            if kind == "end" and extra == "0":
                ended[task] = ns
            elif kind == "start":
                for dep in dependencies.get(task, ()):
                    assert dep in ended, f"{task} started before {dep} ended"
                    assert ended[dep] <= ns, f"{task} started before {dep} ended"

    def most_at_once(self) -> int:
        """The most commands running at one moment (by the ledger's clock)."""
        running = peak = 0
        events = sorted(
            (ns, 0 if kind == "end" else 1) for kind, _, ns, _ in self.lines()
        )  # at one ns an end goes before a start
        for _, starting in events:
            running += 1 if starting else -1
            peak = max(peak, running)
        return peak


def random_dag(n: int, seed: int) -> dict[str, tuple[str, ...]]:
    """*n* tasks, each depending on up to 3 of the 30 before it (seeded)."""
    rng = random.Random(seed)
    dag: dict[str, tuple[str, ...]] = {}
    for i in range(n):
        earlier = range(max(0, i - 30), i)
        count = min(i, rng.randint(0, 3))
        dag[f"t{i}"] = tuple(f"t{d}" for d in sorted(rng.sample(earlier, count)))
    return dag


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def until(condition: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    """Poll *condition* until it returns something truthy (returned); fail naming *what*."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
