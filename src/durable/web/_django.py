"""The dashboard inside a Django project: a URL include whose view calls the WSGI app.

``path("durable/", include(django_urls(dashboard)))`` routes everything under the
prefix to one view. The view turns Django's request back into a WSGI environ with the
prefix as SCRIPT_NAME (so links, redirects and the cookie's path stay under it) and
the app's answer into an `HttpResponse`. It works the same under Django's WSGI and
ASGI handlers (Django runs a sync view in a thread under ASGI; an event stream is then
handed over as an asynchronous iterator, see `_pieces`).

Two of Django's rules meet the dashboard's own:

- The Host header: the view asks ``request.get_host()``, so Django's ALLOWED_HOSTS
  decides first (a bad host is Django's 400), and passes that host on.
- CSRF: the view is exempt from Django's CSRF middleware, whose token the dashboard's
  scripts do not know; the dashboard's own rule (``X-CSRF-Token`` from
  ``api/v1/session`` and a same-origin ``Origin`` on every cookie-borne POST and
  DELETE) still applies, and bearer requests need none.

Django is imported only when `django_urls` is called.
"""

from __future__ import annotations

import io
from typing import Any

from ._app import WebApp
from ._pieces import each_piece


def django_urls(dashboard: WebApp) -> list[Any]:
    """URL patterns that serve *dashboard* (from `make_app`) under the prefix they are
    included at: ``path("durable/", include(django_urls(dashboard)))``.

    Raises:
        TypeError: *dashboard* is not a `WebApp`.
    """
    if not isinstance(dashboard, WebApp):
        raise TypeError(
            "django_urls() takes the WebApp that make_app() returns, not "
            f"{type(dashboard).__name__}: django_urls(make_app(engine, token=...))."
        )
    from django.urls import re_path
    from django.views.decorators.csrf import csrf_exempt

    def view(request: Any, path: str) -> Any:
        return _respond(dashboard, request, path)

    view.__name__ = view.__qualname__ = "durable_dashboard"
    return [re_path(r"^(?P<path>.*)$", csrf_exempt(view), name="durable-dashboard")]


def _respond(dashboard: WebApp, request: Any, rest: str) -> Any:
    """Call *dashboard* for Django's *request*, whose part under the include is *rest*."""
    from django.http import HttpResponse, StreamingHttpResponse

    environ = _environ(request, rest)
    started: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started[:] = [status, headers]

    result = dashboard(environ, start_response)
    status, headers = started
    if isinstance(result, list):
        response = HttpResponse(b"".join(result), status=int(status[:3]))
    elif getattr(request, "scope", None) is not None:
        # Under ASGI, Django would read a synchronous iterator whole before sending any
        # of it (and a live stream never ends): an asynchronous one, each piece awaited
        # from a thread outside Django's (`_pieces`), closed when the client leaves.
        response = StreamingHttpResponse(each_piece(result), status=int(status[:3]))
    else:  # an event stream (_streams.py), sent as it comes; Django closes it at the end
        response = StreamingHttpResponse(result, status=int(status[:3]))
    for name, value in headers:
        response.headers[name] = value
    return response


def _environ(request: Any, rest: str) -> dict[str, Any]:
    """Django's WSGI environ (or, under ASGI, what it made of the scope) with the mount
    as SCRIPT_NAME and the rest as PATH_INFO, and the body it already read."""
    mount = request.path[: len(request.path) - len(rest)].rstrip("/")
    environ = {key: value for key, value in request.META.items() if not key.startswith("wsgi.")}
    environ.update(
        {
            "SCRIPT_NAME": mount.encode().decode("latin-1"),
            "PATH_INFO": ("/" + rest).encode().decode("latin-1"),
            "HTTP_HOST": request.get_host(),  # checked against ALLOWED_HOSTS
            "CONTENT_LENGTH": str(len(request.body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": request.scheme,
            "wsgi.input": io.BytesIO(request.body),
            "wsgi.errors": request.META.get("wsgi.errors") or io.StringIO(),
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
    )
    scope = getattr(request, "scope", None)  # under ASGI
    if scope is not None:
        # Django joins repeated headers with ",", cookie headers too (HTTP/2 may split
        # them); cookies are joined with "; ", or the session's cookie is lost.
        cookies = [value for name, value in scope.get("headers", ()) if name == b"cookie"]
        if cookies:
            environ["HTTP_COOKIE"] = "; ".join(value.decode("latin-1") for value in cookies)
    return environ
