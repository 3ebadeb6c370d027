"""Placeholders in a command task's command, env and cwd: ``{flow.id}`` and the like,
replaced when the command is launched.

``{key}`` is replaced by the value of *key*; ``{{`` and ``}}`` are a literal brace. A
placeholder that is not known is an error when the file is loaded, not a surprise when
the task runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: The placeholders a command may use, with what each is replaced by.
PLACEHOLDERS: Mapping[str, str] = {
    "flow.id": "the flow instance's id (its run id)",
    "flow.name": "the flow's name ([flow] name)",
    "task.name": "the task's name",
    "task.attempt": "the attempt number, from 1",
}

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def expand(text: str, values: Mapping[str, str]) -> str:
    """*text* with each ``{key}`` replaced by ``values[key]``.

    Raises:
        ValueError: a placeholder is not in *values* (the message names it and lists
            the known ones), or a brace is unmatched (write ``{{`` or ``}}``).
    """

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        key = match.group(1)
        if key is None:
            raise ValueError(
                f"unmatched {token!r} in {text!r}: write {token * 2!r} for a literal brace."
            )
        if key not in values:
            known = ", ".join(f"{{{name}}}" for name in values) or "none"
            raise ValueError(
                f"unknown placeholder {{{key}}} in {text!r} (known: {known}); "
                "write {{ and }} for literal braces."
            )
        return values[key]

    return _TOKEN.sub(replace, text)


def check(text: str) -> None:
    """Raise the `expand` error *text* would raise, if any, for the known placeholders."""
    expand(text, dict.fromkeys(PLACEHOLDERS, ""))
