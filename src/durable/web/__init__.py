"""The dashboard and the JSON REST API (``/api/v1``) as one WSGI application.

Standard library only. ``durable ui`` serves it alone on 127.0.0.1; any WSGI host can
mount it under a prefix, since every route is relative to ``SCRIPT_NAME``::

    from durable.web import make_app, serve

    app = make_app("postgresql://app@db/app", token="s3cret")
    server = serve(app, host="127.0.0.1", port=8765)    # bound, not started
    server.serve_forever()

Mounted in another application, pass ``allowed_hosts=("*",)`` so that the host
framework's own Host checks apply, and a fixed ``token`` (and ``secret`` when several
worker processes serve it, so each accepts the others' session cookies). Users then
open ``<prefix>/?token=<token>`` once; scripts send ``Authorization: Bearer <token>``.

Flask (werkzeug's DispatcherMiddleware sets SCRIPT_NAME)::

    from werkzeug.middleware.dispatcher import DispatcherMiddleware
    dashboard = make_app(durable.get_engine(), token=TOKEN, allowed_hosts=("*",))
    flask_app.wsgi_app = DispatcherMiddleware(flask_app.wsgi_app, {"/durable": dashboard})

Django (a small dispatch in ``wsgi.py``; or mount it at the server, e.g. gunicorn or
uWSGI routing ``/durable`` to ``make_app(...)``)::

    django_app = get_wsgi_application()
    dashboard = make_app(durable.get_engine(), token=TOKEN, allowed_hosts=("*",))

    def application(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/durable" or path.startswith("/durable/"):
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + "/durable"
            environ["PATH_INFO"] = path.removeprefix("/durable")
            return dashboard(environ, start_response)
        return django_app(environ, start_response)

ASGI (Starlette, FastAPI; a2wsgi turns the mount's root_path into SCRIPT_NAME)::

    from a2wsgi import WSGIMiddleware
    asgi_app.mount("/durable", WSGIMiddleware(dashboard))

Security is described in `durable.web._security`; the endpoints in ``openapi.json``
(served at ``api/v1/openapi.json``) and docs/reference/api.md.
"""

from ._app import WebApp, make_app
from ._server import serve

__all__ = ["WebApp", "make_app", "serve"]
