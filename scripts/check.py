"""Everything CI checks, in one command: lint, format, types, tests.

    python scripts/check.py [pytest arguments...]

Run it from the project's virtual environment. PostgreSQL tests run when
DURABLE_TEST_POSTGRES_URL is set (CI sets it) and are skipped otherwise.
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
    run(sys.executable, "-m", "pytest", *sys.argv[1:])


if __name__ == "__main__":
    main()
