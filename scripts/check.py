"""Everything CI checks, in one command: lint, format, types, tests.

    python scripts/check.py [pytest arguments...]

Run it from the project's virtual environment. PostgreSQL tests run when
DURABLE_TEST_POSTGRES_URL is set (CI sets it) and are skipped otherwise.

Without arguments the tests run in two passes. First, on three pytest-xdist workers (on
two cores: most of these tests wait on a database, a disk or a browser; 2,888 tests took
9:19 on two workers and 6:49 on three, 6:29 on four, one quiet machine), the
tests that start no worker processes (the dashboard's browser tests included) and the
chaos tests marked ``untimed``, which kill workers at fault points and check only what
the runs end with (each test has its own database or schema; a file's tests stay
together on one worker, in order, because a module-scoped fixture's database is shared
by them). Then the other end-to-end and chaos tests one at a time, because they stop
and time real worker processes and a second test beside them would skew their
timings. With arguments, pytest runs once with them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*command: str) -> None:
    print(f"$ {' '.join(command)}", flush=True)
    result = subprocess.run(command, cwd=ROOT, check=False)
    if result.returncode != 0:
        sys.exit(result.returncode)


def main() -> None:
    run(str(BIN / "ruff"), "check", ".")
    run(str(BIN / "ruff"), "format", "--check", ".")
    run(str(BIN / "mypy"))
    if not os.environ.get("DURABLE_TEST_POSTGRES_URL"):
        print("note: DURABLE_TEST_POSTGRES_URL is not set; PostgreSQL tests will be skipped")
    if sys.argv[1:]:
        run(sys.executable, "-m", "pytest", *sys.argv[1:])
        return
    timed = "(e2e or chaos) and not untimed"
    run(sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadfile", "-m", f"not ({timed})")
    run(sys.executable, "-m", "pytest", "-m", timed)


if __name__ == "__main__":
    main()
