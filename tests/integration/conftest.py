"""The `cli` fixture of the CLI action tests (test_cli_start.py,
test_cli_cancel_retry_send.py, test_cli_bulk.py); other modules define their own."""

from __future__ import annotations

import pytest

from .cli_world import Cli


@pytest.fixture
def cli(url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The CLI pointed at the test's database (the `engine` fixture opens it)."""
    return Cli(capsys, url)
