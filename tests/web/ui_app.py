"""A workflow for `durable ui` subprocess tests to start through the API."""

from __future__ import annotations

from durable import workflow


@workflow
def greet(name: str) -> str:
    return f"hello {name}"
