"""The dashboard and the JSON REST API (``/api/v1``) as one WSGI application.

Standard library only. ``durable ui`` serves it alone on 127.0.0.1; any WSGI host can
mount it under a prefix, since every route is relative to ``SCRIPT_NAME``::

    from durable.web import make_app, serve

    app = make_app("postgresql://app@db/app", token="s3cret")
    server = serve(app, host="127.0.0.1", port=8765)    # bound, not started
    server.serve_forever()

Mounted in another application, under any prefix (docs/howto/web-apps.md has the
whole story): pass a fixed ``token``, ``secret`` when several worker processes serve
it (so each accepts the others' session cookies), and the host names users reach it
by in ``allowed_hosts`` (or ``("*",)`` when the host framework checks Host itself).
Users then open ``<prefix>/?token=<token>`` once; scripts send
``Authorization: Bearer <token>``::

    dashboard = make_app(durable.get_engine(), token=TOKEN, allowed_hosts=["app.example.com"])

    # FastAPI, Starlette: a native ASGI adapter, no extra package
    fastapi_app.mount("/durable", asgi_app(dashboard))

    # Flask: werkzeug's DispatcherMiddleware sets SCRIPT_NAME
    flask_app.wsgi_app = DispatcherMiddleware(flask_app.wsgi_app, {"/durable": dashboard})

    # Django (urls.py); Django's ALLOWED_HOSTS is checked first
    urlpatterns = [path("durable/", include(django_urls(dashboard))), ...]

Security is described in `durable.web._security`; the endpoints in ``openapi.json``
(served at ``api/v1/openapi.json``) and docs/reference/api.md.
"""

from ._app import WebApp, make_app
from ._asgi import AsgiApp, asgi_app
from ._django import django_urls
from ._server import serve

__all__ = ["AsgiApp", "WebApp", "asgi_app", "django_urls", "make_app", "serve"]
