"""The JSON endpoints under /api/v1: read the query or body, call `Operations`, answer.

Handlers stay thin on purpose: the shapes come from `durable.ops`, so the API and the
CLI's ``-o json`` agree. What lives here is HTTP: parsing and checking parameters (a
bad one is a 400 that names it), status codes, ETags, and who is recorded as acting.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.resources
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._http import HTTPError, Request, Response, not_modified
from ._layout import layout
from ._security import Guard, Principal

if TYPE_CHECKING:
    from durable.ops import Operations

MAX_LIMIT = 500

_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
#: a time then " hh:mm": an unencoded "+hh:mm" offset, decoded as a space.
_PLUS = re.compile(r"(\d\d:\d\d(?::\d\d(?:\.\d+)?)?) (\d\d:?\d\d)$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

Params = dict[str, str]
Handler = Callable[[Request, Principal, Params], Response]


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint: a method, a path pattern (relative to the mount) and its handler."""

    method: str
    pattern: re.Pattern[str]
    handler: Handler


def route(method: str, template: str, handler: Handler) -> Route:
    """A route for *template*; ``{name}`` matches any text, slashes included (run ids
    may hold them), so templates with a suffix must come before the bare one."""
    parts = re.split(r"\{(\w+)\}", template)  # literal, name, literal, name, ...
    pattern = "".join(
        f"(?P<{part}>.+)" if index % 2 else re.escape(part) for index, part in enumerate(parts)
    )
    return Route(method, re.compile(pattern + "$"), handler)


class Api:
    """The endpoint handlers, bound to one `Operations` and the app's `Guard`."""

    def __init__(self, ops: Operations, guard: Guard) -> None:
        self.ops = ops
        self.guard = guard

    def routes(self) -> list[Route]:
        """Every endpoint, suffixed paths before the bare ``runs/{id}``."""
        return [
            route("GET", "/api/v1/health", self.health),
            route("GET", "/api/v1/session", self.session),
            route("GET", "/api/v1/openapi.json", self.openapi),
            route("GET", "/api/v1/stats", self.stats),
            route("GET", "/api/v1/tasks/{name}/stats", self.task_stats),
            route("GET", "/api/v1/runs", self.list_runs),
            route("POST", "/api/v1/runs", self.start),
            route("GET", "/api/v1/runs/{id}/history", self.history),
            route("GET", "/api/v1/runs/{id}/graph", self.graph),
            route("POST", "/api/v1/runs/{id}/cancel", self.cancel),
            route("POST", "/api/v1/runs/{id}/retry", self.retry),
            route("POST", "/api/v1/runs/{id}/events", self.send),
            route("GET", "/api/v1/runs/{id}", self.get_run),
        ]

    def health(self, request: Request, principal: Principal, params: Params) -> Response:
        """``{"ok": true}``: the app answers (the database is not consulted)."""
        return Response.json({"ok": True})

    def session(self, request: Request, principal: Principal, params: Params) -> Response:
        """The CSRF token the dashboard sends with POSTs, and whether POSTs are refused."""
        csrf = "" if principal.session is None else self.guard.csrf(principal.session)
        return Response.json({"csrf": csrf, "read_only": self.guard.read_only})

    def openapi(self, request: Request, principal: Principal, params: Params) -> Response:
        """The OpenAPI 3.1 document describing this API."""
        return Response(200, [("Content-Type", "application/json")], openapi_document())

    def list_runs(self, request: Request, principal: Principal, params: Params) -> Response:
        """A page of runs, newest first, filtered by the query."""
        page = self.ops.list_runs(
            workflow=request.arg("workflow"),
            status=request.args("status"),
            queue=request.arg("queue"),
            since=_moment(request, "since"),
            until=_moment(request, "until"),
            parent=request.arg("parent"),
            search=request.arg("search"),
            limit=_limit(request),
            cursor=request.arg("cursor"),
        )
        return Response.json(page)

    def get_run(self, request: Request, principal: Principal, params: Params) -> Response:
        """One run with its history, actions and events; ETag, 304 when unchanged."""
        run_id = params["id"]
        detail: dict[str, Any] = dict(self.ops.get_run(run_id))
        detail["history"] = self.ops.history(run_id)
        detail["actions"] = self.ops.actions(run_id)
        detail["events"] = self.ops.events(run_id)
        return not_modified(request, Response.json(detail))

    def history(self, request: Request, principal: Principal, params: Params) -> Response:
        """The recorded steps of a run, in position order."""
        return Response.json({"items": self.ops.history(params["id"])})

    def graph(self, request: Request, principal: Principal, params: Params) -> Response:
        """The laid-out graph of a run for the dashboard; ETag, 304 when unchanged."""
        run_id = params["id"]
        run = self.ops.get_run(run_id)
        steps: list[Mapping[str, Any]] = list(self.ops.history(run_id))
        return not_modified(request, Response.json(layout(run, steps, self._ghosts(run, steps))))

    def _ghosts(
        self, run: Mapping[str, Any], steps: list[Mapping[str, Any]]
    ) -> list[Mapping[str, Any]]:
        """The history of the latest completed run of the same workflow if it got further
        than *run* has: what is likely to come next. Nothing for a completed run."""
        if run["status"] == "completed":
            return []
        latest = self.ops.list_runs(workflow=run["workflow"], status=["completed"], limit=1)
        if not latest["items"]:
            return []
        theirs = self.ops.history(latest["items"][0]["id"])
        reached = max((step["position"] for step in steps), default=-1)
        return list(theirs) if any(step["position"] > reached for step in theirs) else []

    def stats(self, request: Request, principal: Principal, params: Params) -> Response:
        """Counts, success rates and durations per workflow and task name."""
        return Response.json(
            self.ops.stats(
                since=_moment(request, "since"),
                workflow=request.arg("workflow"),
                task=request.arg("task"),
            )
        )

    def task_stats(self, request: Request, principal: Principal, params: Params) -> Response:
        """The statistics of one task name across runs."""
        return Response.json(self.ops.task_stats(params["name"], since=_moment(request, "since")))

    def start(self, request: Request, principal: Principal, params: Params) -> Response:
        """Start a run of a workflow registered in this process: 201 and its summary."""
        body = request.json()
        summary = self.ops.start(
            _field(body, "workflow", str, required=True),
            _field(body, "args", list, []),
            _field(body, "kwargs", dict, {}),
            id=_field(body, "id", str, None),
            queue=_field(body, "queue", str, "default"),
            priority=_field(body, "priority", int, 0),
            actor=_actor(body, principal),
        )
        response = Response.json(summary, 201)
        response.headers.append(("Location", request.url(f"/api/v1/runs/{summary['id']}")))
        return response

    def cancel(self, request: Request, principal: Principal, params: Params) -> Response:
        """Cancel a run that has not finished."""
        body = request.json()
        return Response.json(self.ops.cancel(params["id"], actor=_actor(body, principal)))

    def retry(self, request: Request, principal: Principal, params: Params) -> Response:
        """Queue a failed or dead run again, reopening the steps that ended it."""
        body = request.json()
        return Response.json(self.ops.retry(params["id"], actor=_actor(body, principal)))

    def send(self, request: Request, principal: Principal, params: Params) -> Response:
        """Send an event to a run: 201 and the stored event."""
        body = request.json()
        result = self.ops.send(
            params["id"],
            _field(body, "name", str, required=True),
            body.get("data"),
            sender=_actor(body, principal, "sender"),
            key=_field(body, "key", str, None),
        )
        return Response.json(result, 201)


@functools.cache
def openapi_document() -> bytes:
    """The bytes of openapi.json, read once from the package."""
    return importlib.resources.files(__package__).joinpath("openapi.json").read_bytes()


def _field(
    body: dict[str, Any], name: str, kind: type, default: Any = None, *, required: bool = False
) -> Any:
    """``body[name]``, checked to be a *kind* (JSON null counts as absent)."""
    value = body.get(name)
    if value is None:
        if required:
            raise HTTPError(400, f"The request body needs a {name!r} field.")
        return default
    # bool is an int subclass in Python, but true is not a priority.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        wanted = {str: "a string", list: "an array", dict: "an object", int: "an integer"}
        raise HTTPError(400, f"The {name!r} field must be {wanted[kind]}, not {value!r}.")
    return value


def _actor(body: dict[str, Any], principal: Principal, *names: str) -> str:
    """Who acts: the first of *names* and ``actor`` the body gives, else the principal's
    default ("api" for bearer clients, "dashboard" for browser sessions)."""
    for name in (*names, "actor"):
        value = _field(body, name, str, None)
        if value is not None and value.strip():
            return str(value.strip())
    return principal.actor


def _limit(request: Request) -> int:
    text = request.arg("limit")
    if text is None:
        return 50
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_LIMIT:
        raise HTTPError(400, f"limit must be a whole number from 1 to {MAX_LIMIT}, not {text!r}.")
    return int(text)


def _moment(request: Request, name: str) -> float | None:
    """Query parameter *name* as epoch seconds: ISO 8601 (UTC unless it says), or an
    age before now like ``30m``, ``2h``, ``7d``."""
    text = request.arg(name)
    if text is None:
        return None
    age = _AGE.fullmatch(text.strip().lower())
    if age is not None:
        return time.time() - float(age[1]) * _SECONDS[age[2]]
    try:
        moment = dt.datetime.fromisoformat(_PLUS.sub(r"\1+\2", text.strip()))
    except ValueError:
        raise HTTPError(
            400,
            f"{name} must be an ISO 8601 time like 2026-01-31T12:00:00Z or an age "
            f"like 30m, 2h or 7d, not {text!r}.",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()
