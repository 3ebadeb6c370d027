"""``GET /api/v1/runs/{id}/waiting``: what a run waits for and, for a typed event, its
JSON Schema, so that any front end builds the form the dashboard builds
(static/form.js). The answer is sent to ``POST /api/v1/runs/{id}/events``, which
answers 400 with the field errors (``errors``) for a payload that does not fit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._http import Request, Response
from ._routes import Params, Route, route
from ._security import Principal

if TYPE_CHECKING:
    from durable.ops import Operations


class WaitingApi:
    """The waiting endpoint, bound to one `Operations`."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops

    def routes(self) -> list[Route]:
        """The endpoint (a suffixed path: before the bare ``runs/{id}``)."""
        return [route("GET", "/api/v1/runs/{id}/waiting", self.waiting)]

    def waiting(self, request: Request, principal: Principal, params: Params) -> Response:
        """A Waiting: the awaited event's name and JSON Schema (null when untyped)."""
        return Response.json(self.ops.waiting(params["id"]))
