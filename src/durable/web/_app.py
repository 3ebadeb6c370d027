"""The WSGI application: checks, routing and the dashboard's files (`_server` serves it).

Every request passes the same gate, in this order: the Host header (400), login by
``?token=`` on the page (303 and a cookie), authentication (401), then for a POST or a
DELETE the read-only switch, CSRF and Origin (403) and, for a POST, the content type
(415). Only then does a handler run. Paths are relative to SCRIPT_NAME, so the app
works under any prefix.
"""

from __future__ import annotations

import functools
import importlib.resources
import logging
import re
import secrets
from collections.abc import Callable, Iterable
from typing import Any

from durable.errors import InvalidValue, StorageError
from durable.ops import Operations, OpsError
from durable.runtime.engine import Engine

from ._api import Api
from ._cache import ResponseCache
from ._http import HTTPError, Request, Response, not_modified, path_param
from ._inputs import path_params
from ._live import Live, LiveHub
from ._metrics import metrics_response
from ._routes import Handler, Params, Route
from ._security import SECURITY_HEADERS, Guard, Principal, unauthorized_page
from ._streams import Streams

log = logging.getLogger("durable.web")

StartResponse = Callable[[str, list[tuple[str, str]]], Any]

#: The methods that change something: read-only, CSRF and Origin checks apply.
WRITES = frozenset({"POST", "DELETE"})
_STATIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
}


class WebApp:
    """The dashboard and the REST API as one WSGI callable (see `make_app`).

    Attributes:
        token: log in with ``/?token=<token>`` or send ``Authorization: Bearer <token>``.
    """

    def __init__(
        self,
        ops: Operations,
        *,
        token: str | None = None,
        read_only: bool = False,
        allowed_hosts: Iterable[str] = (),
        secret: bytes | str | None = None,
        owned: Engine | None = None,
        public_metrics: bool = False,
        metrics_registry: Any = None,
    ) -> None:
        self.ops = ops
        #: serve ``/metrics`` without the token (a scraper on a trusted network).
        self.public_metrics = public_metrics
        self._metrics_registry = metrics_registry
        self.token = token or secrets.token_urlsafe(24)
        key = secret.encode() if isinstance(secret, str) else secret
        self.guard = Guard(
            token=self.token,
            secret=key or secrets.token_bytes(32),
            read_only=read_only,
            allowed_hosts=tuple(allowed_hosts),
        )
        #: changes noticed once per process, for every live page (`_live`)
        self.live = LiveHub(lambda: ops.engine.backend)
        self._cache = ResponseCache(self.live)
        self._routes: list[Route] = [
            *Live(self.live).routes(),
            *Streams(ops).routes(),
            *Api(ops, self.guard).routes(),
        ]
        self._owned = owned

    def allow_host(self, host: str) -> None:
        """Accept *host* in the Host header too (`serve` adds the address it binds)."""
        self.guard.allow_host(host)

    def close(self) -> None:
        """End the live streams; close the engine the app opened from a URL (an engine
        passed in is the caller's)."""
        self.live.close()
        if self._owned is not None:
            self._owned.close()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ)
        try:
            response = self._respond(request)
        except HTTPError as error:
            response = Response.problem(error.status, error.detail, error.headers)
        except OpsError as error:
            fields = getattr(error, "errors", None)  # a typed event's payload: each field
            response = Response.problem(error.status, str(error), errors=fields)
        except InvalidValue as error:  # bad input the database refused: not an outage
            response = Response.problem(400, str(error))
        except StorageError as error:  # its message names no password
            response = Response.problem(503, f"The database is not available: {error}")
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            response = Response.problem(
                500, "The server failed to answer this request; its log has the details."
            )
        headers = [*response.headers, *SECURITY_HEADERS]
        if request.path.startswith("/api/"):
            headers.append(("Cache-Control", "no-store"))
        if response.chunks is not None:  # an event stream (_streams.py)
            start_response(response.status_line, headers)
            if request.method == "HEAD":
                getattr(response.chunks, "close", lambda: None)()
                return []
            return response.chunks
        if response.status != 304:
            headers.append(("Content-Length", str(len(response.body))))
        start_response(response.status_line, headers)
        return [] if request.method == "HEAD" else [response.body]

    def _respond(self, request: Request) -> Response:
        self.guard.check_host(request)
        if request.path == "":
            # Without the slash, the page's relative URLs would miss the mount point.
            query = request.environ.get("QUERY_STRING")
            return Response.redirect(request.url("/") + (f"?{query}" if query else ""), 308)
        if request.path == "/" and request.method == "GET" and "token" in request.query:
            return self.guard.login(request)
        if request.path == "/metrics" and self.public_metrics:
            return metrics_response(request, self.ops.engine, self._metrics_registry)
        principal = self.guard.authenticate(request)
        if principal is None:
            if not request.path.startswith("/api/"):
                return unauthorized_page()
            raise HTTPError(
                401,
                "Log in first: send Authorization: Bearer <token> (the token durable ui "
                "printed), or open the printed URL in a browser.",
                headers=[("WWW-Authenticate", 'Bearer realm="durable"')],
            )
        return self._route(request, principal)

    def _route(self, request: Request, principal: Principal) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        if request.path == "/metrics":
            return metrics_response(request, self.ops.engine, self._metrics_registry)
        if not request.path.startswith("/api/"):
            if method != "GET":
                raise HTTPError(
                    405, f"{request.method} is not allowed here.", headers=_allow("GET")
                )
            return self._static(request)
        allowed: list[str] = []
        for candidate in self._routes:
            match = candidate.pattern.match(request.path)
            if match is None:
                continue
            if candidate.method == method:
                if method in WRITES:
                    self.guard.check_write(request, principal)
                params = {name: path_param(value) for name, value in match.groupdict().items()}
                params = path_params(request.path, params)
                handler = candidate.handler
                if method == "GET" and candidate.shared:  # authorised above; same for all
                    compute = functools.partial(_call, handler, principal, params)
                    return self._cache.answer(request, compute)
                response = handler(request, principal, params)
                if method in WRITES:
                    self.live.bump()  # the page that asked sees its change at once
                return response
            allowed.append(candidate.method)
        if allowed:
            raise HTTPError(
                405,
                f"{request.method} is not allowed on {request.path}; use {', '.join(allowed)}.",
                headers=_allow(*allowed),
            )
        raise HTTPError(404, f"There is no endpoint {request.path}; see api/v1/openapi.json.")

    def _static(self, request: Request) -> Response:
        """``/`` is index.html; ``/static/<name>`` a file of the static directory."""
        name = "index.html" if request.path == "/" else request.path.removeprefix("/static/")
        if name == request.path or not _STATIC_NAME.fullmatch(name):
            return Response.html(404, "<!doctype html><title>Not found</title><p>Not found.")
        resource = importlib.resources.files(__package__).joinpath("static", name)
        if not resource.is_file():
            return Response.html(404, "<!doctype html><title>Not found</title><p>Not found.")
        body = resource.read_bytes()
        content_type = _CONTENT_TYPES.get(name[name.rfind(".") :], "application/octet-stream")
        # Revalidated on every load (a cheap 304), so a new version shows at once.
        response = Response(200, [("Content-Type", content_type), ("Cache-Control", "no-cache")])
        response.body = body
        return not_modified(request, response)


def _call(handler: Handler, principal: Principal, params: Params, request: Request) -> Response:
    return handler(request, principal, params)


def _allow(*methods: str) -> list[tuple[str, str]]:
    return [("Allow", ", ".join(dict.fromkeys(methods)))]


def make_app(
    engine_or_url: Engine | str,
    *,
    token: str | None = None,
    read_only: bool = False,
    allowed_hosts: Iterable[str] = (),
    secret: bytes | str | None = None,
    public_metrics: bool = False,
    metrics_registry: Any = None,
) -> WebApp:
    """The dashboard and REST API for one database, as a WSGI application.

    Args:
        engine_or_url: the `durable.Engine` to act through, or a database URL to open
            one (closed by ``app.close()``). Workflows started through the API must be
            registered (imported) in this process.
        token: the login secret; None generates a random one (``app.token``).
        read_only: refuse every POST and DELETE (start, cancel, pause, resume, retry,
            send; pause, resume, trigger and delete schedules; restart, kill and answer
            flow tasks) with 403.
        allowed_hosts: Host names accepted besides localhost, 127.0.0.1 and [::1];
            ``("*",)`` accepts any, for a host framework that checks hosts itself.
        secret: the HMAC key of session cookies and CSRF tokens; random if None. Give
            every process serving the same dashboard the same secret and token.
        public_metrics: serve ``/metrics`` (Prometheus, ``durable[metrics]``) without
            the token; by default it needs it like every other path.
        metrics_registry: the prometheus_client registry ``/metrics`` serves, into which
            the engine is counted (None: prometheus_client's default ``REGISTRY``).
    """
    if isinstance(engine_or_url, str):
        engine = owned = Engine(engine_or_url)
    else:
        engine, owned = engine_or_url, None
    return WebApp(
        Operations(engine),
        token=token,
        read_only=read_only,
        allowed_hosts=allowed_hosts,
        secret=secret,
        owned=owned,
        public_metrics=public_metrics,
        metrics_registry=metrics_registry,
    )
