"""The JSON endpoints under /api/v1: read the query or body, call `Operations`, answer.

Handlers stay thin on purpose: the shapes come from `durable.ops`, so the API and the
CLI's ``-o json`` agree. What lives here is HTTP: status codes, ETags, and who is
recorded as acting; every parameter is read and checked through `_inputs` (a bad one
is a 400 that names it).
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import _inputs as inputs
from ._flow_api import FlowApi
from ._http import Request, Response, not_modified
from ._layout import layout
from ._routes import Params, Route, route
from ._security import Guard, Principal
from ._waiting import WaitingApi

if TYPE_CHECKING:
    from durable.ops import Operations


class Api:
    """The endpoint handlers, bound to one `Operations` and the app's `Guard`."""

    def __init__(self, ops: Operations, guard: Guard) -> None:
        self.ops = ops
        self.guard = guard

    def routes(self) -> list[Route]:
        """Every endpoint, suffixed paths before the bare ``runs/{id}`` and
        ``schedules/{id}``; the flows' endpoints come from `FlowApi`."""
        return [
            route("GET", "/api/v1/health", self.health, shared=False),
            route("GET", "/api/v1/session", self.session, shared=False),
            route("GET", "/api/v1/openapi.json", self.openapi, shared=False),
            route("GET", "/api/v1/stats", self.stats),
            route("GET", "/api/v1/tasks/{name}/stats", self.task_stats),
            route("GET", "/api/v1/overview", self.overview),
            route("GET", "/api/v1/workflows", self.workflows),
            route("GET", "/api/v1/runs", self.list_runs),
            route("POST", "/api/v1/runs", self.start),
            route("GET", "/api/v1/runs/{id}/history", self.history),
            route("GET", "/api/v1/runs/{id}/graph", self.graph),
            *WaitingApi(self.ops).routes(),
            route("POST", "/api/v1/runs/{id}/cancel", self.cancel),
            route("POST", "/api/v1/runs/{id}/pause", self.pause),
            route("POST", "/api/v1/runs/{id}/resume", self.resume),
            route("POST", "/api/v1/runs/{id}/retry", self.retry),
            route("POST", "/api/v1/runs/{id}/fork", self.fork),
            route("POST", "/api/v1/runs/{id}/events", self.send),
            route("GET", "/api/v1/runs/{id}", self.get_run),
            route("GET", "/api/v1/schedules", self.list_schedules),
            route("POST", "/api/v1/schedules/{id}/pause", self.pause_schedule),
            route("POST", "/api/v1/schedules/{id}/resume", self.resume_schedule),
            route("POST", "/api/v1/schedules/{id}/trigger", self.trigger_schedule),
            route("GET", "/api/v1/schedules/{id}", self.get_schedule),
            route("DELETE", "/api/v1/schedules/{id}", self.delete_schedule),
            route("GET", "/api/v1/queues", self.queues),
            *FlowApi(self.ops).routes(),
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
            workflow=inputs.query_text(request, "workflow"),
            status=inputs.query_texts(request, "status"),
            queue=inputs.query_text(request, "queue"),
            version=inputs.query_text(request, "version"),
            since=inputs.moment(request, "since"),
            until=inputs.moment(request, "until"),
            parent=inputs.query_text(request, "parent"),
            search=inputs.query_text(request, "search"),
            limit=inputs.limit(request),
            cursor=inputs.cursor(request),
            attributes=inputs.attributes(request),
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
                since=inputs.moment(request, "since"),
                workflow=inputs.query_text(request, "workflow"),
                task=inputs.query_text(request, "task"),
            )
        )

    def task_stats(self, request: Request, principal: Principal, params: Params) -> Response:
        """The statistics of one task name across runs."""
        since = inputs.moment(request, "since")
        return Response.json(self.ops.task_stats(params["name"], since=since))

    def overview(self, request: Request, principal: Principal, params: Params) -> Response:
        """The dashboard's landing page: counts, charts, figures, queues, schedules."""
        return Response.json(self.ops.overview())

    def workflows(self, request: Request, principal: Principal, params: Params) -> Response:
        """Every workflow and task name with its figures and a sparkline."""
        return Response.json(self.ops.workflows(since=inputs.moment(request, "since")))

    def start(self, request: Request, principal: Principal, params: Params) -> Response:
        """Start a run of a workflow registered in this process: 201 and its summary."""
        body = inputs.body(request)
        summary = self.ops.start(
            inputs.text(body, "workflow", required=True),
            inputs.field(body, "args", list, []),
            inputs.field(body, "kwargs", dict, {}),
            id=inputs.text(body, "id"),
            queue=inputs.text(body, "queue", "default"),
            priority=inputs.priority(body),
            actor=inputs.actor(body, principal),
            attributes=inputs.field(body, "attributes", dict, None),
        )
        response = Response.json(summary, 201)
        response.headers.append(("Location", request.url(f"/api/v1/runs/{summary['id']}")))
        return response

    def cancel(self, request: Request, principal: Principal, params: Params) -> Response:
        """Cancel a run that has not finished."""
        body = inputs.body(request)
        return Response.json(self.ops.cancel(params["id"], actor=inputs.actor(body, principal)))

    def pause(self, request: Request, principal: Principal, params: Params) -> Response:
        """Pause a run: at once if queued or waiting, at its next durable call if running."""
        body = inputs.body(request)
        return Response.json(self.ops.pause(params["id"], actor=inputs.actor(body, principal)))

    def resume(self, request: Request, principal: Principal, params: Params) -> Response:
        """Resume a paused run, or a cancelled one from where its cancellation reached it."""
        body = inputs.body(request)
        return Response.json(self.ops.resume(params["id"], actor=inputs.actor(body, principal)))

    def retry(self, request: Request, principal: Principal, params: Params) -> Response:
        """Queue a failed or dead run again, reopening the steps that ended it."""
        body = inputs.body(request)
        return Response.json(self.ops.retry(params["id"], actor=inputs.actor(body, principal)))

    def fork(self, request: Request, principal: Principal, params: Params) -> Response:
        """Start a new run from a position of this one's history: 201 and the new run."""
        body = inputs.body(request)
        result = self.ops.fork(
            params["id"],
            inputs.position(body, "from"),
            id=inputs.text(body, "id"),
            actor=inputs.actor(body, principal),
        )
        response = Response.json(result, 201)
        response.headers.append(("Location", request.url(f"/api/v1/runs/{result['run']['id']}")))
        return response

    def send(self, request: Request, principal: Principal, params: Params) -> Response:
        """Send an event to a run: 201 and the stored event."""
        body = inputs.body(request)
        result = self.ops.send(
            params["id"],
            inputs.text(body, "name", required=True),
            body.get("data"),
            sender=inputs.actor(body, principal, "sender"),
            key=inputs.text(body, "key"),
        )
        return Response.json(result, 201)

    # -- schedules ----------------------------------------------------------------------

    def list_schedules(self, request: Request, principal: Principal, params: Params) -> Response:
        """Every schedule, by id."""
        return Response.json({"items": self.ops.list_schedules()})

    def get_schedule(self, request: Request, principal: Principal, params: Params) -> Response:
        """One schedule."""
        return Response.json(self.ops.get_schedule(params["id"]))

    def pause_schedule(self, request: Request, principal: Principal, params: Params) -> Response:
        """Stop a schedule's ticks; the runs it started go on."""
        inputs.body(request)  # checked like any POST body, though nothing in it is used
        return Response.json(self.ops.pause_schedule(params["id"]))

    def resume_schedule(self, request: Request, principal: Principal, params: Params) -> Response:
        """Fire a paused schedule again, from its next tick after now."""
        inputs.body(request)
        return Response.json(self.ops.resume_schedule(params["id"]))

    def trigger_schedule(self, request: Request, principal: Principal, params: Params) -> Response:
        """Start a run of the schedule now: 201, ``{"run": id}`` and its Location."""
        inputs.body(request)
        started = self.ops.trigger_schedule(params["id"])
        response = Response.json(started, 201)
        response.headers.append(("Location", request.url(f"/api/v1/runs/{started['run']}")))
        return response

    def delete_schedule(self, request: Request, principal: Principal, params: Params) -> Response:
        """Delete a schedule; the runs it started stay."""
        return Response.json(self.ops.delete_schedule(params["id"]))

    # -- queues -------------------------------------------------------------------------

    def queues(self, request: Request, principal: Principal, params: Params) -> Response:
        """Every queue in use or declaring limits, by name: depth, running, limits."""
        return Response.json({"items": self.ops.queues()})


@functools.cache
def openapi_document() -> bytes:
    """The bytes of openapi.json, read once from the package."""
    return importlib.resources.files(__package__).joinpath("openapi.json").read_bytes()
