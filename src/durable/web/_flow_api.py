"""The JSON endpoints of process flows under /api/v1/flows: list them, view one with its
laid-out graph, read a task's log, and restart, kill or answer a task.

As in `_api`, the handlers are thin: the shapes come from ``ops.flows`` (so the API and
``durable flow ... -o json`` agree) and its errors carry their status (404 for an
unknown flow or task, 409 for a task whose state does not allow the verb, 400 for an
answer that does not fit the form). What lives here is HTTP: reading and checking the
body, the ETag of a flow's view, and recording the principal as the actor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _inputs as inputs
from ._flow_layout import layout_flow
from ._http import HTTPError, Request, Response, not_modified
from ._routes import Params, Route, route
from ._security import Principal

if TYPE_CHECKING:
    from durable.ops import Operations

#: How a human task can be answered: its ``status`` in the body of ``.../done``.
ANSWERS = ("finished", "failed")


class FlowApi:
    """The flows' endpoint handlers, bound to one `Operations`."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops

    def routes(self) -> list[Route]:
        """The flows' endpoints, the task paths before the bare ``flows/{id}`` (whose
        ``{id}`` would match them too: a nested flow's id holds a slash)."""
        task = "/api/v1/flows/{id}/tasks/{task}"
        return [
            route("GET", "/api/v1/flows", self.list_flows),
            route("GET", f"{task}/log", self.log),
            route("POST", f"{task}/restart", self.restart),
            route("POST", f"{task}/kill", self.kill),
            route("POST", f"{task}/done", self.done),
            route("GET", "/api/v1/flows/{id}", self.get_flow),
        ]

    def list_flows(self, request: Request, principal: Principal, params: Params) -> Response:
        """A page of flow instances, newest first, with their tasks counted by status."""
        page = self.ops.flows.list(limit=inputs.limit(request), cursor=inputs.cursor(request))
        return Response.json(page)

    def get_flow(self, request: Request, principal: Principal, params: Params) -> Response:
        """One flow: its tasks as they stand, and ``layout``, where the dashboard draws
        each box and arrow (from the file's dependencies); ETag, 304 when unchanged."""
        view: dict[str, Any] = dict(self.ops.flows.view(params["id"]))
        view["layout"] = layout_flow(view)
        return not_modified(request, Response.json(view))

    def log(self, request: Request, principal: Principal, params: Params) -> Response:
        """The captured output of the task's latest launch (so far, while it runs)."""
        return Response.json(self.ops.flows.logs(params["id"], params["task"]))

    def restart(self, request: Request, principal: Principal, params: Params) -> Response:
        """Run a failed, finished or killed task again, then every task downstream."""
        body = inputs.body(request)
        actor = inputs.actor(body, principal)
        return Response.json(self.ops.flows.restart(params["id"], params["task"], actor=actor))

    def kill(self, request: Request, principal: Principal, params: Params) -> Response:
        """End a running task: its command (SIGTERM, then SIGKILL) or its nested flow."""
        body = inputs.body(request)
        actor = inputs.actor(body, principal)
        return Response.json(self.ops.flows.kill(params["id"], params["task"], actor=actor))

    def done(self, request: Request, principal: Principal, params: Params) -> Response:
        """Answer a human task waiting for it: ``{"data": {...}, "status": "finished"}``
        (or ``"failed"``); the data must fit the task's form."""
        body = inputs.body(request)
        data = inputs.field(body, "data", dict, {})
        status = inputs.text(body, "status", "finished")
        if status not in ANSWERS:
            raise HTTPError(
                400,
                f"The 'status' field must be finished or failed, not {status!r}: "
                "it says how the human task ended.",
            )
        answer = self.ops.flows.done(
            params["id"], params["task"], data, status=status, actor=inputs.actor(body, principal)
        )
        return Response.json(answer)
