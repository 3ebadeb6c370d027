"""The `cli` fixture of the CLI tests: the CLI pointed at the test's database. Modules
whose tests need runs made first define their own (test_cli_runs.py, ...)."""

from __future__ import annotations

import pytest

from .cli_world import Cli


@pytest.fixture
def cli(url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The CLI pointed at the test's database (the `engine` fixture opens it)."""
    return Cli(capsys, url)
