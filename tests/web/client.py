"""Calls a WSGI app in-process, as a browser or an API client would, and a stand-in for
`durable.ops.Operations` that records calls, for testing the HTTP layer alone."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any, cast
from urllib.parse import urlsplit
from wsgiref.util import setup_testing_defaults

from durable.ops import Operations
from durable.web import WebApp

HOST = "127.0.0.1:8765"
ORIGIN = f"http://{HOST}"


@dataclass
class Reply:
    """A response: status, headers (in order) and body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The value of header *name*, or None."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    @property
    def content_type(self) -> str:
        return (self.header("Content-Type") or "").split(";")[0]

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Client:
    """Sends requests to *app*: as a bearer client when *token* is set, else with the
    cookie a `login` got."""

    app: Any
    script_name: str = ""
    token: str | None = None
    cookie: str | None = None
    csrf: str | None = None
    host: str | None = HOST
    extra: dict[str, str] = field(default_factory=dict)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: str = "",
        json_body: Any = None,
        body: bytes | None = None,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """One request; *path* is relative to the mount (``/api/v1/runs``)."""
        if json_body is not None:
            body = json.dumps(json_body).encode()
            content_type = content_type or "application/json"
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": self.script_name,
            "PATH_INFO": path.encode().decode("latin-1"),
            "QUERY_STRING": query,
            "wsgi.input": io.BytesIO(body or b""),
            "CONTENT_LENGTH": str(len(body or b"")),
        }
        if content_type is not None:
            environ["CONTENT_TYPE"] = content_type
        every = {**self.extra, **(headers or {})}
        if self.token is not None:
            every.setdefault("Authorization", f"Bearer {self.token}")
        if self.cookie is not None:
            every.setdefault("Cookie", self.cookie)
        if method in ("POST", "DELETE") and self.csrf is not None:
            every.setdefault("X-CSRF-Token", self.csrf)
            every.setdefault("Origin", ORIGIN)
        if self.host is not None:
            environ["HTTP_HOST"] = self.host
        for name, value in every.items():
            environ["HTTP_" + name.upper().replace("-", "_")] = value
        setup_testing_defaults(environ)
        if self.host is None:
            del environ["HTTP_HOST"]
        captured: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]]) -> None:
            captured["status"] = int(status[:3])
            captured["headers"] = headers

        chunks = self.app(environ, start_response)
        return Reply(captured["status"], captured["headers"], b"".join(chunks))

    def get(self, path: str, query: str = "", **kwargs: Any) -> Reply:
        return self.request("GET", path, query=query, **kwargs)

    def post(self, path: str, json_body: Any = None, **kwargs: Any) -> Reply:
        return self.request(
            "POST", path, json_body={} if json_body is None else json_body, **kwargs
        )

    def delete(self, path: str, **kwargs: Any) -> Reply:
        return self.request("DELETE", path, **kwargs)

    def login(self, token: str) -> Reply:
        """Open ``/?token=...`` like a browser; keep the cookie and fetch the CSRF token."""
        reply = self.get("/", query=f"token={token}")
        assert reply.status == 303, reply.body
        [(name, morsel)] = SimpleCookie(reply.header("Set-Cookie")).items()
        assert name.startswith("durable_session"), name
        self.cookie = f"{name}={morsel.value}"
        self.csrf = self.get("/api/v1/session").json()["csrf"]
        return reply


def location_path(reply: Reply) -> str:
    """The path and query of a redirect's Location."""
    location = urlsplit(reply.header("Location") or "")
    return location.path + (f"?{location.query}" if location.query else "")


SUMMARY = {
    "id": "r1",
    "workflow": "app.flow",
    "status": "queued",
    "queue": "default",
    "priority": 0,
    "parent_id": None,
    "origin": None,
    "created_at": "2026-01-01T00:00:00.000000Z",
    "started_at": None,
    "finished_at": None,
    "duration": None,
    "deadline_at": None,
    "wake_at": None,
    "waiting_on": None,
    "cancel_requested": False,
    "pause_requested": False,
    "recoveries": 0,
}

SCHEDULE = {
    "id": "s1",
    "workflow": "app.flow",
    "every": 60.0,
    "catch_up": "latest",
    "max_catch_up": 100,
    "jitter": 0.0,
    "overlap": "skip",
    "queue": "default",
    "priority": 0,
    "declared": False,
    "orphaned": False,
    "paused": False,
    "next_fire_at": "2026-01-01T00:01:00.000000Z",
    "last_fire_at": None,
    "last_run": None,
    "created_at": "2026-01-01T00:00:00.000000Z",
    "updated_at": "2026-01-01T00:00:00.000000Z",
}


class FakeOps:
    """Answers like `Operations` with fixed shapes and records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.fail_with: BaseException | None = None

    def _record(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((name, args, kwargs))
        if self.fail_with is not None:
            raise self.fail_with

    def last(self, name: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments of the latest call of *name*."""
        found = [(args, kwargs) for called, args, kwargs in self.calls if called == name]
        assert found, f"{name} was not called; calls: {self.calls}"
        return found[-1]

    def list_runs(self, **filters: Any) -> dict[str, Any]:
        self._record("list_runs", **filters)
        return {"items": [SUMMARY], "next_cursor": None}

    def stats(self, **filters: Any) -> dict[str, Any]:
        self._record("stats", **filters)
        return {"workflows": [], "tasks": []}

    def start(self, workflow: str, args: Any, kwargs: Any, **options: Any) -> dict[str, Any]:
        self._record("start", workflow, args, kwargs, **options)
        return SUMMARY

    def cancel(self, run_id: str, **options: Any) -> dict[str, Any]:
        self._record("cancel", run_id, **options)
        return {**SUMMARY, "status": "cancelled"}

    def pause(self, run_id: str, **options: Any) -> dict[str, Any]:
        self._record("pause", run_id, **options)
        return {**SUMMARY, "status": "paused"}

    def resume(self, run_id: str, **options: Any) -> dict[str, Any]:
        self._record("resume", run_id, **options)
        return SUMMARY

    def retry(self, run_id: str, **options: Any) -> dict[str, Any]:
        self._record("retry", run_id, **options)
        return {"run": SUMMARY, "reopened": [1]}

    def fork(self, run_id: str, from_position: int, **options: Any) -> dict[str, Any]:
        self._record("fork", run_id, from_position, **options)
        forked = {**SUMMARY, "id": options.get("id") or "forked", "origin": run_id}
        return {"run": forked, "origin": run_id, "from": from_position}

    def send(self, run_id: str, name: str, data: Any, **options: Any) -> dict[str, Any]:
        self._record("send", run_id, name, data, **options)
        event = {
            "id": 1,
            "run_id": run_id,
            "name": name,
            "sent_at": "2026-01-01T00:00:00.000000Z",
            "sender": options.get("sender"),
            "key": options.get("key"),
            "consumed_position": None,
        }
        return {"event": event}

    def list_schedules(self) -> list[dict[str, Any]]:
        self._record("list_schedules")
        return [SCHEDULE]

    def get_schedule(self, schedule_id: str) -> dict[str, Any]:
        self._record("get_schedule", schedule_id)
        return {**SCHEDULE, "id": schedule_id}

    def pause_schedule(self, schedule_id: str) -> dict[str, Any]:
        self._record("pause_schedule", schedule_id)
        return {**SCHEDULE, "id": schedule_id, "paused": True, "next_fire_at": None}

    def resume_schedule(self, schedule_id: str) -> dict[str, Any]:
        self._record("resume_schedule", schedule_id)
        return {**SCHEDULE, "id": schedule_id}

    def trigger_schedule(self, schedule_id: str) -> dict[str, Any]:
        self._record("trigger_schedule", schedule_id)
        return {"run": f"{schedule_id}@2026-01-01T00:00:00.000000Z-manual"}

    def delete_schedule(self, schedule_id: str) -> dict[str, Any]:
        self._record("delete_schedule", schedule_id)
        return {"deleted": schedule_id}


def fake_app(ops: FakeOps | None = None, **options: Any) -> WebApp:
    """The web app over a `FakeOps` (a new one unless given)."""
    return WebApp(cast(Operations, ops or FakeOps()), **options)
