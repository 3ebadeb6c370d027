"""What an endpoint is: a method, a path pattern and a handler, and how a path template
becomes a pattern. Shared by the modules that hold handlers (`_api`, `_flow_api`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ._http import Request, Response
from ._security import Principal

Params = dict[str, str]
Handler = Callable[[Request, Principal, Params], Response]


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint: a method, a path pattern (relative to the mount) and its handler."""

    method: str
    pattern: re.Pattern[str]
    handler: Handler
    #: a GET whose answer is the same for every principal and may be shared between
    #: clients while live updates run (`_cache`); False for a stream or a per-session
    #: answer.
    shared: bool = True


def route(method: str, template: str, handler: Handler, *, shared: bool = True) -> Route:
    """A route for *template*; ``{name}`` matches any text, slashes included (run ids
    may hold them), so templates with a suffix must come before the bare one. *shared*:
    see `Route.shared`."""
    parts = re.split(r"\{(\w+)\}", template)  # literal, name, literal, name, ...
    pattern = "".join(
        f"(?P<{part}>.+)" if index % 2 else re.escape(part) for index, part in enumerate(parts)
    )
    return Route(method, re.compile(pattern + "$"), handler, shared)
